"""Tools built on the pipeline: ``explain`` (fusion decisions and costs), ``checking``
(random inputs and the agreement rule used by ``mlfuse run`` and the tests),
``benchmark`` (GPU timing), ``tuning`` (contraction tile search and its cache) and
``ptx_report`` (registers and spills of every kernel, without a GPU)."""
