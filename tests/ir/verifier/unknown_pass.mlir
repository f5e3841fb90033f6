// RUN: not mlfuse opt %s --passes cse,fusee 2>&1 | filecheck %s
// An unknown pass name is an error that lists the known ones.
// CHECK: error: unknown pass 'fusee' (known: {{.*}}lower-tensor-to-loops{{.*}})
func @f(%x: f32[N]) -> (f32[N]) {
  return %x
}
