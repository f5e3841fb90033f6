"""The fp32 matmul precision choice, in the manner of ``torch.set_float32_matmul_precision``:
how f32 contractions (matmul, batched matmul, conv2d) multiply.

- ``"highest"`` (the default): exact fp32 on the SIMT cores (variant ``"simt"``).
- ``"high"``: 3xTF32 on tensor cores (variant ``"mma-tf32x3"``): each f32 operand is
  split into a TF32 high part and the TF32-rounded residual, and the products
  lo*hi + hi*lo + hi*hi (small terms first) accumulate in f32. About fp32's accuracy
  (the dropped lo*lo and the residuals' rounding are below 2^-21 relative to each
  product) at tensor-core speed.
- ``"medium"``: plain TF32 (variant ``"mma-tf32"``): each operand rounded to 10
  mantissa bits; errors near 2^-11 relative per product.

The choice is an option of ``compile_source``/``compile_file``/``compile_onnx``
(``matmul_precision=``), of the command line (``--matmul-precision``) and of the
``schedule-contractions`` pass, which records it in each f32 contraction kernel's
``variant`` attribute; codegen reads only that. f16, bf16 and f64 contractions are
not affected (as in PyTorch).
"""
from __future__ import annotations

from mlfuse.errors import MlfuseError

PRECISIONS = ("highest", "high", "medium")
DEFAULT = "highest"

# The contraction variant an f32 sum of products gets at each precision.
F32_VARIANT = {"highest": "simt", "high": "mma-tf32x3", "medium": "mma-tf32"}

# What each precision means, for explain and the docs.
MEANING = {"simt": "exact fp32 FMAs on the SIMT cores",
           "mma-tf32x3": "3xTF32 on tensor cores: lo*hi + hi*lo + hi*hi of the TF32 split, "
                         "f32 accumulation",
           "mma-tf32": "TF32 on tensor cores: operands rounded to 10 mantissa bits, f32 "
                       "accumulation",
           "mma-f16": "f16 on tensor cores, f32 accumulation",
           "mma-bf16": "bf16 on tensor cores, f32 accumulation"}

# The relative error unit the agreement rule (mlfuse.tools.checking) takes for an f32
# contraction at each variant, in place of f32's eps (2^-23): TF32 keeps 10 mantissa
# bits (eps 2^-10); 3xTF32 represents each operand to within 2^-22 of it (the residual
# rounded to 11 significant bits) and drops lo*lo (below 2^-22 of the product): about
# 3 * 2^-22 per product, so 2^-21 (four f32 eps).
VARIANT_EPS = {"mma-tf32": 2.0**-10, "mma-tf32x3": 2.0**-21}


def check_matmul_precision(value, where: str = "matmul_precision") -> str:
    """``value`` if it is one of PRECISIONS (None: the default), else an MlfuseError
    naming ``where`` (the option as the caller spelt it)."""
    if value is None:
        return DEFAULT
    if value not in PRECISIONS:
        raise MlfuseError(f"{where} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


__all__ = ["DEFAULT", "F32_VARIANT", "MEANING", "PRECISIONS", "VARIANT_EPS",
           "check_matmul_precision"]
