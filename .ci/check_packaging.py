"""CI: the wheel installs no top-level ``dialects`` package, and mlfuse (its dialects
and grammars included) imports both from a plain checkout and from the wheel.

Run by .ci/run after the editable install. Each import check runs ``python -S`` with
sys.path set by hand, so the editable install's finder (a .pth file) cannot answer
for the layout under test.
"""
import glob
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
SITE = sysconfig.get_paths()["purelib"]  # numpy, lark, numba of this environment
PROBE = """
import importlib.util, sys
sys.path[:0] = {paths!r}
import mlfuse.dialects
from mlfuse.dialects import parse_ir
from mlfuse.pipeline import compile_text
if {wheel!r}:
    assert importlib.util.find_spec("dialects") is None, "the wheel installed a top-level dialects"
module = compile_text("func f(x: f32[N]) -> f32[N] {{ return relu(x) * 2.0 }}")
print(mlfuse.dialects.__file__, len(module.funcs[0].body.ops), "ops")
"""


def probe(paths: list[str], cwd: str, wheel: bool) -> str:
    done = subprocess.run([sys.executable, "-S", "-c", PROBE.format(paths=paths, wheel=wheel)], cwd=cwd,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"import check failed from {paths[0]}:\n{done.stderr}")
    return done.stdout.strip()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "-w", tmp, str(CHECKOUT)], check=True)
        (wheel,) = glob.glob(f"{tmp}/mlfuse-*.whl")
        tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
        bad = tops - {"mlfuse"} - {t for t in tops if t.endswith(".dist-info")}
        if bad:
            sys.exit(f"the wheel installs top-level {sorted(bad)} beside mlfuse")
        target = f"{tmp}/site"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target,
                        wheel], check=True)
        from_wheel = probe([target, SITE], cwd=tmp, wheel=True)
        if not from_wheel.startswith(f"{target}/mlfuse/dialects/"):
            sys.exit(f"from the wheel, mlfuse.dialects came from {from_wheel}")
    from_checkout = probe([str(CHECKOUT), SITE], cwd=tempfile.gettempdir(), wheel=False)
    if not from_checkout.startswith(f"{CHECKOUT}/dialects/"):
        sys.exit(f"from the checkout, mlfuse.dialects came from {from_checkout}")
    print(f"packaging: wheel top level {sorted(tops)}; imports from the wheel and from the checkout")


if __name__ == "__main__":
    main()
