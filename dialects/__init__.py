"""mlfuse's dialects, one module each: ``tensor`` (values), ``loops`` (buffers and
loop nests), ``fused`` (kernels). ``arith`` holds the scalar ops the lower two share,
generated from the same elementwise table as the tensor ops (``elementwise``)."""
