"""A tokenizer that cannot load because of the environment says what in the environment, in one line."""

from __future__ import annotations

from tests.helpers.cli import error_lines, run_cli


def test_a_torchvision_built_for_another_torch_is_named_not_tiktoken(tmp_path):
    """speculators pulls in a torchvision built for another torch; beside the CPU torch its import fails
    ("operator torchvision::nms does not exist"), transformers imports it while loading a model class and reports the
    class as missing. The error names torchvision and the command that removes it (a stand-in torchvision that fails
    as that build does, on PYTHONPATH; the real one was seen to give the same line)."""
    site = tmp_path / "site" / "torchvision"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n',
                                      encoding="utf-8")
    proc = run_cli("demo", "--workdir", str(tmp_path / "w"), "--limit", "2", "--no-progress", check=False,
                   env={"PYTHONPATH": str(site.parent)})
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(error_lines(proc)) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "torchvision (RuntimeError: operator torchvision::nms does not exist)" in proc.stderr, proc.stderr
    assert "pip uninstall -y torchvision torchaudio" in proc.stderr and "tiktoken" not in proc.stderr, proc.stderr
