"""The framework of a user's own script, read from what it imports (launcher/frameworks/
detect.py), and `launcher run` budgeting for it: --framework, a built-in workload's, the
script's, the profile's, none."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from launcher.frameworks.detect import Detected, detect
from tests.docker_helpers import in_process, launcher


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def of(tmp_path: Path, source: str, env: dict[str, str] | None = None,
       modules: dict[str, str] | None = None) -> Detected:
    """`python3 train.py` with `source`, and local modules by dotted name (`mylib.model`)."""
    write(tmp_path, {"train.py": source, **{k.replace(".", "/") + ".py": v
                                           for k, v in (modules or {}).items()}})
    return detect(["python3", "train.py"], tmp_path, env or {})


@pytest.mark.parametrize(("source", "framework"), [
    ("import torch", "torch"),
    ("from torch.utils.data import DataLoader", "torch"),
    ("import tensorflow as tf", "tf"),
    ("from tensorflow import keras", "tf"),
    ("import tensorflow.keras", "tf"),
    ("import keras", "tf"),
    ("import jax", "jax"),
    ("import jax.numpy as jnp", "jax"),
    ("import flax.linen as nn", "jax"),
    ("import optax", "jax"),
    ("import lightning", "torch"),
    ("import pytorch_lightning as pl", "torch"),
    ("import transformers", "torch"),
    ("import os, sys\nimport numpy as np", None),
])
def test_each_import_form(tmp_path, source, framework):
    found = of(tmp_path, "import os\n" + source + "\n")
    assert found.framework == framework
    if framework:
        assert found.where == f"train.py:2 ({source.split(chr(10))[-1]})"
        assert found.script == "train.py"


def test_keras_follows_keras_backend(tmp_path):
    assert of(tmp_path, "import keras\n", {"KERAS_BACKEND": "jax"}).framework == "jax"
    assert of(tmp_path, "import keras\n", {"KERAS_BACKEND": "torch"}).where == \
        "train.py:1 (import keras; KERAS_BACKEND=torch)"
    assert of(tmp_path, "import keras\n", {"KERAS_BACKEND": "numpy"}).framework is None
    # the script's own os.environ[...] = wins over the environment; setdefault does not
    forced = "import os\nos.environ['KERAS_BACKEND'] = 'jax'\nimport keras\n"
    assert of(tmp_path, forced, {"KERAS_BACKEND": "torch"}).framework == "jax"
    default = "import os\nos.environ.setdefault('KERAS_BACKEND', 'jax')\nimport keras\n"
    assert of(tmp_path, default, {"KERAS_BACKEND": "torch"}).framework == "torch"
    assert of(tmp_path, default, {}).framework == "jax"


def test_transformers_is_torch_only_when_nothing_else_is_imported(tmp_path):
    found = of(tmp_path, "import transformers\nimport tensorflow as tf\n")
    assert (found.framework, found.found) == ("tf", ("tf",))


def test_several_frameworks_the_script_first_then_top_level_then_first(tmp_path):
    found = of(tmp_path, "from mylib import net\n\ndef later():\n    import jax\n"
                         "import tensorflow\nimport torch\n",
               modules={"mylib.__init__": "", "mylib.net": "import torch\n"})
    # in the script, tf is the first at top level (jax's import is inside a function; it
    # still counts, after); the local module's torch comes after the script's own
    assert found.framework == "tf" and found.where == "train.py:5 (import tensorflow)"
    assert found.found == ("tf", "torch", "jax")
    # the script's own import inside a function outranks a local module's at top level
    own = of(tmp_path, "import helper\n\ndef main():\n    import jax\n",
             modules={"helper": "import torch\n"})
    assert (own.where, own.found) == ("train.py:4 (import jax)", ("jax", "torch"))
    local = of(tmp_path, "from mylib import net\n",
               modules={"mylib.__init__": "", "mylib.net": "import jax\nimport torch\n"})
    assert (local.framework, local.found) == ("jax", ("jax", "torch"))


def test_local_modules_are_followed_breadth_first(tmp_path):
    found = of(tmp_path, "import os\nimport helpers\n\n\nfrom mylib.model import Net\n",
               modules={"helpers": "import json\n", "mylib.__init__": "",
                        "mylib.model": "from tensorflow import keras\n"})
    assert found.framework == "tf"
    assert found.where == "mylib/model.py:1 (from tensorflow import keras), imported by train.py:5"
    deep = of(tmp_path, "import mylib\n", modules={
        "mylib.__init__": "from . import model\n", "mylib.model": "from .layers import dense\n",
        "mylib.layers": "import torch\n"})
    assert deep.where == ("mylib/layers.py:1 (import torch), imported by mylib/model.py:1 <- "
                          "mylib/__init__.py:1 <- train.py:1")
    # a module beside a script in another folder, not only under the working directory
    write(tmp_path, {"src/run.py": "import model\n", "src/model.py": "import jax\n"})
    assert detect(["python3", "src/run.py"], tmp_path, {}).where == \
        "src/model.py:1 (import jax), imported by src/run.py:1"


def test_cycles_of_local_imports_end(tmp_path):
    found = of(tmp_path, "import a\n", modules={"a": "import b\nimport train\n",
                                                "b": "import a\n"})
    assert found == Detected(None, script="train.py")
    found = of(tmp_path, "import a\n", modules={"a": "import b\n",
                                                "b": "import a\nimport optax\n"})
    assert found.where == "b.py:2 (import optax), imported by a.py:1 <- train.py:1"


def test_unparsable_and_unreadable_files_never_raise(tmp_path, monkeypatch):
    # a syntax error (or syntax newer than this interpreter's): its import lines still count
    found = of(tmp_path, "import torch\ndef broken(:\n")
    assert found.where == "train.py:1 (import torch)"
    found = of(tmp_path, "import mod\n", modules={"mod": "def broken(:\nfrom jax import numpy\n"})
    assert found.where == "mod.py:2 (from jax import numpy), imported by train.py:1"
    (tmp_path / "nul.py").write_bytes(b"import torch\x00\xff\xfe\n")
    assert detect(["python3", "nul.py"], tmp_path, {}).framework == "torch"
    (tmp_path / "dir.py").mkdir()  # a folder where a module was looked for
    assert of(tmp_path, "import dir\n").framework is None
    write(tmp_path, {"locked.py": "import torch\n"})
    read_bytes = Path.read_bytes

    def refused(self: Path) -> bytes:
        if self.name == "locked.py":
            raise PermissionError(13, "Permission denied")
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refused)
    assert of(tmp_path, "import locked\nimport jax\n").found == ("jax",)
    assert detect(["python3", "missing.py"], tmp_path, {}) == Detected(None, script="missing.py")
    deep = "if x:\n" + "".join("    " * i + "if x:\n" for i in range(1, 150)) + " " * 600 + \
        "import torch\n"
    assert of(tmp_path, deep).framework in ("torch", None)  # no RecursionError either way


def test_type_checking_imports_are_ignored_function_imports_count(tmp_path):
    found = of(tmp_path, "from typing import TYPE_CHECKING\nimport typing\n"
                         "if TYPE_CHECKING:\n    import torch\n    import mylib\n"
                         "if typing.TYPE_CHECKING:\n    import tensorflow\n"
                         "else:\n    import json\n"
                         "def main():\n    import jax\n", modules={"mylib": "import optax\n"})
    assert found.where == "train.py:11 (import jax)" and found.found == ("jax",)


@pytest.mark.parametrize("command", [
    ["python", "train.py"], ["python3", "train.py"], ["python3.12", "train.py"],
    ["/usr/bin/python3", "train.py"], [".venv/bin/python", "train.py"],
    ["python3", "-u", "-O", "-X", "dev", "-W", "ignore", "train.py", "--epochs", "3"],
    ["python3", "-OO", "-Wignore", "-Ximportmode", "-B", "train.py"],
    ["env", "OMP_NUM_THREADS=1", "python3", "-u", "train.py"],
])
def test_the_script_of_a_python_command(tmp_path, command):
    write(tmp_path, {"train.py": "import torch\n"})
    assert detect(command, tmp_path, {}).where == "train.py:1 (import torch)"


def test_a_module_run_with_dash_m(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": "import jax\n",
                     "app/__main__.py": "from pkg import mod\n"})
    assert detect(["python3", "-m", "pkg.mod"], tmp_path, {}).where == "pkg/mod.py:1 (import jax)"
    assert detect(["python3", "-um", "app"], tmp_path, {}).where == \
        "pkg/mod.py:1 (import jax), imported by app/__main__.py:1"
    assert detect(["python3", "-m", "torch.distributed.run", "train.py"], tmp_path, {}) == \
        Detected("torch", "the command (-m torch.distributed.run)", ("torch",))
    assert detect(["python3", "-m", "http.server"], tmp_path, {}).framework is None
    assert detect(["torchrun", "--nproc-per-node", "2", "train.py"], tmp_path, {}) == \
        Detected("torch", "the command (torchrun)", ("torch",))
    # a package's own module named like a framework is no framework
    write(tmp_path, {"lib/__init__.py": "from .torch import helpers\nfrom . import jax\n",
                     "lib/torch.py": "", "lib/jax.py": "", "uses.py": "import lib\n"})
    assert detect(["python3", "uses.py"], tmp_path, {}) == Detected(None, script="uses.py")


def test_a_script_run_directly_needs_a_python_shebang(tmp_path):
    write(tmp_path, {"train.py": "#!/usr/bin/env python3\nimport torch\n",
                     "venv.py": "#!/home/me/.venv/bin/python3.12 -u\nimport jax\n",
                     "noshebang.py": "import torch\n", "run.sh": "#!/bin/bash\nimport torch\n"})
    (tmp_path / "a.out").write_bytes(b"\x7fELF\x02\x01\x01\x00import torch\n")
    assert detect(["./train.py", "--epochs", "3"], tmp_path, {}).where == \
        "train.py:2 (import torch)"
    assert detect([str(tmp_path / "venv.py")], tmp_path, {}).framework == "jax"
    for command in (["./noshebang.py"], ["./run.sh"], ["./a.out"], ["train.py"]):
        assert detect(command, tmp_path, {}).framework is None, command


@pytest.mark.parametrize("command", [
    ["bash", "run.sh"], ["sh", "-c", "python3 train.py"], ["./a.out"], ["python3"],
    ["python3", "-c", "import torch"], ["python3", "-uc", "import torch"], ["python3", "-"],
    ["python3", "-m"], ["python3", "-c", "pass", "train.py"], [],
])
def test_what_runs_no_python_file_gives_no_framework(tmp_path, command):
    write(tmp_path, {"train.py": "import torch\n", "run.sh": "python3 train.py\n",
                     "a.out": "import torch\n"})
    assert detect(command, tmp_path, {}) == Detected(None)


def test_the_size_and_file_caps(tmp_path):
    big = "# padding\n" * 220_000 + "import torch\n"
    assert len(big) > 2 << 20
    assert of(tmp_path, "import big\n", modules={"big": big}).framework is None  # not read
    small = "# padding\n" * 100 + "import torch\n"
    assert of(tmp_path, "import small\n", modules={"small": small}).framework == "torch"
    chain = {f"m{i}": f"import m{i + 1}\n" for i in range(60)}
    assert of(tmp_path, "import m0\n", modules={**chain, "m60": "import torch\n"}).framework \
        is None  # the 62nd file
    near = {**chain, "m40": "import m41\nimport jax\n"}
    assert of(tmp_path, "import m0\n", modules=near).framework == "jax"
    write(tmp_path, {"t.py": "import a\n", "a.py": "import b\n", "b.py": "import torch\n"})
    assert detect(["python3", "t.py"], tmp_path, {}, max_files=2).framework is None
    assert detect(["python3", "t.py"], tmp_path, {}, max_files=3).framework == "torch"
    assert detect(["python3", "t.py"], tmp_path, {}, max_bytes=20).framework is None


# -- through `launcher run` ------------------------------------------------------------------


def _dry(cwd: Path, *args: str) -> dict:  # type: ignore[type-arg]
    out = in_process("run", "--runtime", "native", "--dry-run", "--json", *args, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_run_budgets_for_the_framework_the_script_imports(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": "import os\nfrom mylib.model import Net\n",
                     "mylib/__init__.py": "", "mylib/model.py": "import torch\n",
                     "plain.py": "print('hi')\n"})
    dry = _dry(tmp_path, "--", "python3", "train.py")
    assert dry["framework"] == "torch"
    assert dry["framework_from"] == "mylib/model.py:1 (import torch), imported by train.py:2"
    assert dry["spec"]["labels"]["launcher.framework"] == "torch"
    assert "torch_intra_op" in dry["threads_estimate"]["breakdown"]
    # --framework still wins; a script that imports none takes the profile's
    wins = _dry(tmp_path, "--framework", "none", "--", "python3", "train.py")
    assert (wins["framework"], wins["framework_from"]) == ("none", "--framework")
    assert "torch_intra_op" not in wins["threads_estimate"]["breakdown"]
    plain = _dry(tmp_path, "-p", "docker-5gpu", "--gpus", "none", "--", "python3", "plain.py")
    assert (plain["framework"], plain["framework_from"]) == (
        "tf", "profile framework (profiles/docker-5gpu.yaml:6)")
    # the script outranks the profile's key: a profile serves more than one script
    over = _dry(tmp_path, "-p", "docker-5gpu", "--gpus", "none", "--", "python3", "train.py")
    assert over["framework"] == "torch"
    # a workload names its own framework, whatever its script imports
    write(tmp_path, {"wl/mine.yaml": "name: mine\ncommand: [python3, train.py]\n"
                                     "framework: jax\n"})
    monkeypatch.setenv("LAUNCHER_WORKLOAD_PATH", str(tmp_path / "wl"))
    mine = _dry(tmp_path, "mine")
    assert (mine["framework"], mine["framework_from"]) == ("jax", "workload mine")
    words = in_process("run", "--runtime", "native", "--dry-run", "--", "python3", "train.py",
                       cwd=tmp_path)
    assert "framework: torch, from mylib/model.py:1 (import torch), imported by train.py:2\n" \
        in words.stdout


def test_a_real_run_says_where_its_framework_was_read(tmp_path):
    write(tmp_path, {"train.py": "print('ran')\n\ndef later():\n    import jax\n"})
    proc = launcher("run", "--runtime", "native", "--", sys.executable, "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran\n"
    start = next(x for x in proc.stderr.splitlines() if "native run" in x)
    assert start.startswith("launcher: profile auto, framework jax: "), start
    assert start.endswith("; framework read from train.py:4 (import jax)"), start
    told = launcher("-v", "run", "--runtime", "native", "--framework", "none", "--",
                    sys.executable, "train.py", cwd=tmp_path)
    assert told.returncode == 0, told.stderr
    assert "framework none: " in told.stderr and "read from" not in told.stderr
    assert "launcher: framework none from --framework" in told.stderr


def test_a_refusal_names_the_plan_with_the_framework_read(tmp_path):
    write(tmp_path, {"train.py": "import torch\n", "tight.yaml": "extends: base\n"
                                                                "limits: {pids: 3}\n"})
    out = in_process("run", "--runtime", "native", "-p", "./tight.yaml", "--", "python3",
                     "train.py", cwd=tmp_path)
    assert out.returncode == 1
    assert "(see `launcher plan --profile ./tight.yaml --framework torch`)" in out.stderr, \
        out.stderr


def test_a_plugin_frameworks_marks_detect_it(tmp_path, fakes):
    """Which imports mark a framework is its registry entry's (`module`, `marks`), so a
    plugin's is detected as the built-in ones are (launcher-fakes: onnx, `import onnxruntime`)."""
    script = tmp_path / "infer.py"
    script.write_text("import onnxruntime as ort\n")
    found = detect(["python3", str(script)], tmp_path)
    assert found.framework == "onnx", found
