"""The fusion pass and its parts: the nest ``graph`` it decides on, the ``cost``
model, the ``kernel_builder`` that inlines a group into one ``fused.kernel``, and
``fuse`` (the planner and the ``fuse`` / ``no-fuse`` passes)."""
