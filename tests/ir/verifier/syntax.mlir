// RUN: not mlfuse opt %s 2>&1 | filecheck %s
// A parse error names the unexpected token at its line:column, then quotes the line
// and marks the token with a caret (FileCheck ignores leading blanks, so the
// column is pinned by the :23: only).
// CHECK:      syntax.mlir:[[# @LINE + 4]]:23: error: unexpected 'f32'; expected
// CHECK-NEXT:   %y = tensor.relu %x f32[N]
// CHECK-NEXT:                       ^
func @f(%x: f32[N]) -> (f32[N]) {
  %y = tensor.relu %x f32[N]
  return %y
}
