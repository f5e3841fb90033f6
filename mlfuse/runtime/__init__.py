"""Running generated modules: loading their source (``loader``), checking and
converting arguments (``arguments``), device memory (``memory``), the device
itself (``device``), and the fast path of a call: launch plans recorded from the
host function (``launch_plan``, ``launch_kinds``) launched through the CUDA
driver (``cuda_driver``) by ``launcher`` (docs/launch.md)."""
