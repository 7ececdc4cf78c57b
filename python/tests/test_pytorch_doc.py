"""docs/pytorch.md is a test: its ```sh and ```python blocks run in order, as written, in an empty
folder, with `placelab` and `python3` on the PATH meaning the build's command line and the Python
that has torch. A command the doc shows that fails, or a doc that drifts from the code, fails here."""

import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt-get install python3-torch)")
pytest.importorskip("torchvision", reason="torchvision is not installed (Debian: python3-torchvision)")

from conftest import SOURCE_DIR  # noqa: E402

BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.S | re.M)


def doc_blocks():
    text = (SOURCE_DIR / "docs" / "pytorch.md").read_text()
    return [(kind, body) for kind, body in BLOCK.findall(text)]


def test_the_doc_has_the_whole_path():
    kinds = [kind for kind, _ in doc_blocks()]
    text = "\n".join(body for _, body in doc_blocks())
    assert kinds.count("python") == 1
    for step in ("placelab.torch capture", "placelab run", "export-placement", "simulate --graph", "pt.place(",
                 "placelab.torch profile", "verify --backend torch"):
        assert step in text, step


def test_the_doc_runs_as_written(cli, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(cli, bin_dir / "placelab")
    os.symlink(sys.executable, bin_dir / "python3")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PLACELAB_PYTHON=sys.executable)
    work = tmp_path / "work"
    work.mkdir()
    for i, (kind, body) in enumerate(doc_blocks()):
        command = ["bash", "-euo", "pipefail", "-c", body] if kind == "sh" else [sys.executable, "-c", body]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"block {i} ({kind}) of docs/pytorch.md failed:\n{body}\n{done.stdout}\n{done.stderr}"
        if "verify --backend torch" in body:
            out = done.stdout
            assert "the same training step as the unplaced model" in out, out
            assert re.search(r"^predicted\s+\S+", out, re.M) and re.search(r"^measured\s+\S+", out, re.M), out
    best = (work / "modules.json").read_text()
    assert '"layer1' in best or '"": ' in best
