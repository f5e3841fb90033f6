"""What both Lark front ends share (the .fuse language and the textual IR): finding
the grammar files, reading source text, and turning Lark errors into
``file:line:col`` messages with the line and a caret."""
