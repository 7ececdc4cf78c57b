"""python3 -m placelab.torch measure and profile, and the --model spec every subcommand shares
(docs/python.md, "Measuring a placement, profiling the CPU"). Without GPUs the maps' cuda:N are
mapped to the CPU with --device-map: every move still happens, within the CPU, so the placed step's
loss and gradients must equal the unplaced one's. The models are small: each test takes a second or
two, most of it in the CLI's steps."""

import gc
import os
import pathlib
import json
import re
import statistics
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt-get install python3-torch)")

import placelab as pl  # noqa: E402
import placelab.torch as pt  # noqa: E402
from placelab import _torch_measure  # noqa: E402

FACTORIES = '''
import torch
from torch import nn
from torch_models import TinyGpt


def mlp():
    torch.manual_seed(0)
    return {"model": nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)),
            "example_inputs": (torch.randn(8, 16),), "loss": nn.CrossEntropyLoss(),
            "target": torch.randint(0, 4, (8,)), "optimizer": "momentum"}


def gpt():
    torch.manual_seed(0)
    loss = lambda logits, t: nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1))
    return {"model": TinyGpt(vocab=31, block=8, dim=16, heads=2, layers=2),
            "example_inputs": (torch.randint(0, 31, (2, 8)),), "loss": loss,
            "target": torch.randint(0, 31, (2, 8)), "optimizer": "adam"}


def conv():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 10))
    return {"model": model, "example_inputs": (torch.randn(2, 3, 10, 10),), "loss": nn.CrossEntropyLoss(),
            "target": torch.randint(0, 10, (2,))}


def not_a_dict():
    return [nn.Linear(2, 2)]


def typo():
    return {"model": nn.Linear(2, 2), "example_inputs": (torch.randn(1, 2),), "loss": nn.MSELoss(),
            "target": torch.randn(1, 2), "optimiser": "adam"}
'''

# Three devices each: the MLP's layers in turn; the decoder's embeddings, block 0, the rest.
MAPS = {
    "mlp": {"0": "cuda:0", "1": "cuda:1", "2": "cuda:2"},
    "gpt": {"": "cuda:0", "tok": "cuda:0", "pos": "cuda:0", "blocks.0": "cuda:1", "blocks.1": "cuda:2",
            "ln_f": "cuda:2", "head": "cuda:2"},
}
TO_CPU = ["--device-map", "cuda:0=cpu", "--device-map", "cuda:1=cpu", "--device-map", "cuda:2=cpu"]
RESULT_KEYS = {"steps_s", "median_s", "warmup_s", "devices", "moves", "mapped", "numerics", "torch", "threads"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("factories") / "measure_models.py"
    path.write_text(FACTORIES)
    return path


def run(argv, capsys):
    """The CLI in this process: (exit status, stdout, stderr)."""
    status = pt.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("factory", ["mlp", "gpt"])
def test_measure_a_three_device_map_on_the_cpu_trains_as_the_unplaced_model(factory, models, tmp_path, capsys):
    mapping = tmp_path / "modules.json"
    mapping.write_text(json.dumps(MAPS[factory]))
    out = tmp_path / "result.json"
    status, stdout, err = run(["measure", "--model", f"{models}:{factory}", "--placement", mapping, *TO_CPU,
                               "--steps", 4, "--check", "-o", out], capsys)
    assert status == 0, err
    r = json.loads(out.read_text())
    assert set(r) == RESULT_KEYS
    assert len(r["steps_s"]) == 3 and all(t > 0 for t in r["steps_s"]) and r["warmup_s"] > 0
    assert r["median_s"] == statistics.median(r["steps_s"])
    assert r["devices"] == ["cpu"] and r["moves"] > 0
    assert r["mapped"] == {"cuda:0": "cpu", "cuda:1": "cpu", "cuda:2": "cpu"}
    n = r["numerics"]
    assert n["loss_rel_error"] <= 1e-5 and n["max_grad_rel_error"] <= 1e-5, n
    assert n["worst_parameter"] in dict(pt._load_model_spec(f"{models}:{factory}").model.named_parameters())
    assert (r["torch"], r["threads"]) == (torch.__version__, torch.get_num_threads())
    assert stdout.startswith(f"{out}: median ") and "values moved per forward; check: loss relative error" in stdout


def test_measure_all_on_the_cpu(models, tmp_path, capsys):
    out = tmp_path / "result.json"
    status, stdout, err = run(["measure", "--model", f"{models}:mlp", "--all-on", "cpu", "--steps", 2, "-o", out],
                              capsys)
    assert status == 0, err
    r = json.loads(out.read_text())
    assert (r["devices"], r["moves"], r["mapped"], r["numerics"]) == (["cpu"], 0, {}, None)
    assert len(r["steps_s"]) == 1 and r["median_s"] == r["steps_s"][0] > 0
    assert "check" not in stdout
    if torch.cuda.device_count() < 8:  # a device this host lacks runs where --missing-devices says
        status, _, err = run(["measure", "--model", f"{models}:mlp", "--all-on", "cuda:7", "--missing-devices", "cpu",
                              "--steps", 2, "-o", out], capsys)
        assert status == 0, err
        r = json.loads(out.read_text())
        assert (r["devices"], r["mapped"]) == (["cpu"], {"cuda:7": "cpu"})


def test_profile_times_every_op_of_the_capture_and_the_host_s_dispatch(models, tmp_path, capsys):
    """The factory spec from a .py file serves capture and profile alike; profile's graph is the
    capture's with measured_s on every op the host issues, and its machine file loads in C++."""
    captured, profiled, machine = tmp_path / "c.json", tmp_path / "p.json", tmp_path / "cpu.yaml"
    status, _, err = run(["capture", "--model", f"{models}:gpt", "--device", "cpu", "-o", captured], capsys)
    assert status == 0, err
    status, stdout, err = run(["profile", "--model", f"{models}:gpt", "--steps", 3, "-o", profiled,
                               "--machine-out", machine], capsys)
    assert status == 0, err
    c, p = json.loads(captured.read_text()), json.loads(profiled.read_text())
    assert [{k: v for k, v in op.items() if k != "measured_s"} for op in p["ops"]] == c["ops"]
    assert p["edges"] == c["edges"] and p["name"] == c["name"] == "TinyGpt"
    issued = [op for op in p["ops"] if op["type"] != "VariableV2"]
    assert all(set(op["measured_s"]) == {"cpu"} and op["measured_s"]["cpu"] > 0 for op in issued)
    assert not any("measured_s" in op for op in p["ops"] if op["type"] == "VariableV2")
    assert stdout.startswith(f"{profiled}: {len(issued)} ops timed, sum of op times ")

    text = machine.read_text()
    dispatch_s = float(re.search(r"^    dispatch_s: (\S+)", text, re.M).group(1))
    assert 0 <= dispatch_s <= 1
    m = pl.Machine.from_yaml(str(machine))  # the C++ reader validates every field
    assert (m.name, m.device_names, m.device_kinds) == ("localhost-torch", ["cpu:0"], ["cpu"])
    assert m.memory_bytes[0] > 0
    g = pl.Graph.from_json(str(profiled))
    assert g.measured_times[issued[0]["name"]] == issued[0]["measured_s"]


def test_profile_figures_add_up_to_the_plain_step_in_the_simulator(models, tmp_path):
    p = _torch_measure.profile(pt._load_model_spec(f"{models}:conv"), steps=3)
    assert p.counted_steps == 2 and len(p.plain_steps_s) == 2
    assert p.host_ops == sum(1 for op in p.graph.ops if op["type"] != "VariableV2") == p.ops_timed
    # The second convolution's one backward call is three ops, its time split by their FLOPs: the
    # input and filter gradients have the same signature, so the same share.
    by_name = {op["name"]: op for op in p.graph.ops}
    split = [by_name[f"gradients/3/{t}"]["measured_s"]["cpu"] for t in ("Conv2DBackpropInput", "Conv2DBackpropFilter")]
    assert split[0] == pytest.approx(split[1], rel=1e-12) and by_name["gradients/3/Sum"]["measured_s"]["cpu"] < split[0]
    assert p.op_sum_s == pytest.approx(sum(op["measured_s"]["cpu"] for op in p.graph.ops if "measured_s" in op))
    assert p.dispatch_s == max(0.0, (p.plain_step_s - p.op_sum_s) / p.host_ops)
    # One CPU runs the ops one after another, each after its issue: the simulated step is the ops'
    # times plus dispatch_s per op the host issues (parameters are not issued), which is the plain
    # step whenever dispatch_s > 0.
    graph = p.graph.to_graph()
    machine = tmp_path / "cpu.yaml"
    machine.write_text(p.machine_yaml())
    step = pl.Simulator(graph, pl.Machine.from_yaml(str(machine))).simulate(
        np.zeros(graph.num_ops, dtype=np.int32)).step_time_s
    issued = p.op_sum_s + p.dispatch_s * p.host_ops
    assert step == pytest.approx(issued, rel=1e-9)
    if p.dispatch_s > 0:
        assert issued == pytest.approx(p.plain_step_s, rel=1e-9)


def test_a_recorded_step_leaves_no_hook_behind():
    """profile steps the same model again after each recorded step: the recorder's hooks on the
    autograd nodes must go with the step, or a parameter's AccumulateGrad, which the next forward
    finds again, keeps them (and the recorder) alive and collects one more per step."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    rec = pt._Recorder(model, "cpu")
    rec.run_step((torch.randn(3, 4),), torch.nn.CrossEntropyLoss(), torch.randint(0, 2, (3,)))
    alive = weakref.ref(rec)
    enabled = gc.isenabled()
    gc.disable()  # freed by reference counting alone: nothing holds it in a cycle
    try:
        del rec
        assert alive() is None
    finally:
        if enabled:
            gc.enable()


def test_bad_specs_and_missing_device_maps_exit_2_with_the_reason(models, tmp_path, capsys):
    out = tmp_path / "r.json"
    spec = f"{models}:mlp"
    cases = [
        (["capture", "--model", "resnet50", "-o", out],
         "--model resnet50: must be torchvision:NAME, package.module:function or path/to/file.py:function"),
        (["capture", "--model", "no/such/file.py:make", "-o", out], "--model no/such/file.py:make: no/such/file.py: "
                                                                    "no such file"),
        (["capture", "--model", "no_such_package_xyz.models:make", "-o", out],
         "--model no_such_package_xyz.models:make: cannot import no_such_package_xyz.models"),
        (["capture", "--model", f"{models}:nothing", "-o", out], f"{models} has no attribute 'nothing'"),
        (["capture", "--model", f"{models}:not_a_dict", "-o", out],
         "the factory returned a list: must return a dict with keys model, example_inputs, loss, target"),
        (["capture", "--model", f"{models}:typo", "-o", out], "the factory's dict has unknown key 'optimiser'"),
        (["capture", "--model", spec, "--batch", 4, "-o", out], "--batch = 4: only for --model torchvision:NAME"),
        (["measure", "--model", spec, "--all-on", "cuda:7", "-o", out],
         "--all-on cuda:7: cuda:7: torch has no such device here"),
        (["measure", "--model", spec, "--all-on", "cuda:0", "--device-map", "cuda:0", "-o", out],
         "--device-map cuda:0: must be FROM=TO"),
        (["measure", "--model", spec, "--all-on", "cpu", "--steps", 1, "-o", out], "--steps = 1: must be in [2, 10000]"),
        (["measure", "--model", spec, "--all-on", "cpu", "--missing-devices", "cuda:99", "-o", out],
         "--missing-devices cuda:99: torch has no device cuda:99 here"),
        (["measure", "--model", spec, "--placement", tmp_path / "none.json", "-o", out], "cannot read"),
        (["profile", "--model", spec, "-o", out, "--machine-out", tmp_path / "no" / "such" / "cpu.yaml"],
         "cpu.yaml: cannot write"),
    ]
    for argv, message in cases:
        status, _, err = run(argv, capsys)
        assert status == 2 and err.startswith("placelab.torch: error: ") and message in err, (argv, err)
    if torch.cuda.device_count() < 3:
        mapping = tmp_path / "modules.json"
        mapping.write_text(json.dumps(MAPS["mlp"]))
        status, _, err = run(["measure", "--model", spec, "--placement", mapping, "-o", out], capsys)
        missing = f"cuda:{torch.cuda.device_count()}"
        assert status == 2 and f"pass --device-map {missing}=cpu" in err, err
    assert not out.exists()


def test_the_module_command_line_exits_2(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        def make():
            raise RuntimeError("no data here")
    """))
    r = subprocess.run([sys.executable, "-m", "placelab.torch", "measure", "--model", f"{bad}:make", "--all-on", "cpu",
                        "-o", str(tmp_path / "r.json")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr == f"placelab.torch: error: --model {bad}:make: make() failed: RuntimeError: no data here\n"


def test_a_scenario_verifies_its_best_placement_with_torch(models, tmp_path, cli, capsys):
    """`verify: {backend: torch}`: every N samples the best placement so far runs as PyTorch runs it
    (python3 -m placelab.torch measure, started by the C++ run); without GPUs its devices are mapped
    to the CPU and the record says so, with the numerical check's verdict."""
    graph = tmp_path / "mlp.json"
    assert run(["capture", "--model", f"{models}:mlp", "-o", graph], capsys)[0] == 0
    scenario = tmp_path / "mlp.yaml"
    scenario.write_text(f"name: mlp\ngraph: {graph}\nmachine: k80x4\ndevices: gpus\nsamples: 24\nbatch: 12\n"
                        f"seeds: 1\nop_level: false\nlearners:\n  critpath: {{}}\nbaselines: [round_robin]\n"
                        f"verify: {{backend: torch, every: 12, steps: 3, model: \"{models}:mlp\"}}\n")
    tests = str(pathlib.Path(__file__).resolve().parent)  # the factories import torch_models
    env = dict(os.environ, PYTHONPATH=tests, PLACELAB_PYTHON=sys.executable)
    done = subprocess.run([cli, "run", str(scenario), "-q", "-o", str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(summary["verifications"]) == 2
    for v in summary["verifications"]:
        assert v["measured_s"] > 0 and v["predicted_s"] > 0
        assert v["source"].startswith("torch"), v
        assert "loss and gradients equal the unplaced model's" in v["source"], v
    # Without `model:` the scenario is refused with its line.
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"graph: {graph}\nlearners:\n  critpath: {{}}\nverify: {{backend: torch, every: 12}}\n")
    refused = subprocess.run([cli, "run", str(bad), "-q", "-o", str(tmp_path / "bad")], capture_output=True, text=True)
    assert refused.returncode == 2
    assert "verify: backend torch needs `model:`" in refused.stderr


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason=f"needs 2 CUDA GPUs; torch sees {torch.cuda.device_count()}")
def test_measure_on_two_gpus_times_synchronised_steps_and_matches_the_cpu_numerics(models, tmp_path, capsys):
    """On GPUs nothing is mapped: the placed model runs on cuda:0 and cuda:1 and its numerical check
    compares with the unplaced model on cuda:0 (float32 sums on GPUs differ in order: 1e-4)."""
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"0": "cuda:0", "1": "cuda:1", "2": "cuda:1"}))
    out = tmp_path / "r.json"
    status, _, err = run(["measure", "--model", f"{models}:mlp", "--placement", mapping, "--steps", "4", "--check",
                          "-o", out], capsys)
    assert status == 0, err
    r = json.loads(out.read_text())
    assert r["mapped"] == {} and r["devices"] == ["cuda:0", "cuda:1"]
    assert r["moves"] > 0 and all(t > 0 for t in r["steps_s"])
    assert r["numerics"]["max_grad_rel_error"] <= 1e-4
