"""placelab.torch.place: a model placed by a module map trains exactly as the unplaced model does.
Without GPUs, the map's devices (cuda:0..3) are mapped to the CPU with device_map: every move the
placement needs still happens (PlacedModel.moves counts them), it just copies within the CPU, so the
loss and every gradient must equal the unplaced model's."""

import copy
import json
import subprocess

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt-get install python3-torch)")
nn = torch.nn

import placelab as pl  # noqa: E402
import placelab.torch as pt  # noqa: E402
from torch_models import LstmLm, TinyGpt  # noqa: E402

CPU_FOR_ALL = {f"cuda:{i}": "cpu" for i in range(8)}


@pytest.fixture(scope="module")
def torchvision():
    return pytest.importorskip("torchvision", reason="torchvision is not installed (Debian: python3-torchvision)")


def spread_map(model, inputs, loss, target):
    """A module map over 4 GPUs from the model's own capture: its modules in program order, in four
    consecutive runs (a pipeline-like split), the model itself on cuda:0."""
    g = pt.capture(model, inputs, loss, target)
    order = []
    for op in g.ops:
        if op["module"] and op["module"] not in order:
            order.append(op["module"])
    return {"": "cuda:0", **{m: f"cuda:{4 * i // len(order)}" for i, m in enumerate(order)}}


def one_step(model, inputs, loss, target):
    model.zero_grad(set_to_none=True)
    value = loss(model(*inputs), target)
    value.backward()
    return value.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def check_same_training_step(model, inputs, loss, target):
    torch.manual_seed(0)
    reference = copy.deepcopy(model)
    mapping = spread_map(model, inputs, loss, target)
    placed = pt.place(copy.deepcopy(model), mapping, device_map=CPU_FOR_ALL)
    assert len(set(mapping.values())) > 1  # spread (an LSTM LM has only three modules)
    torch.manual_seed(1)
    want_loss, want_grads = one_step(reference, inputs, loss, target)
    torch.manual_seed(1)
    got_loss, got_grads = one_step(placed, inputs, loss, target.to(placed.device))
    assert placed.moves > 0  # values crossed the map's devices
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=0)
    got_grads = {n.removeprefix("model."): g for n, g in got_grads.items()}
    assert got_grads.keys() == want_grads.keys()
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    # Any optimizer takes the placed parameters.
    opt = torch.optim.Adam(placed.parameters(), lr=1e-3)
    opt.step()


def test_resnet50(torchvision):
    model = torchvision.models.resnet50(num_classes=10).train()
    check_same_training_step(model, (torch.randn(2, 3, 64, 64),), nn.CrossEntropyLoss(), torch.randint(0, 10, (2,)))


def test_inception_v3_with_aux_head(torchvision):
    model = torchvision.models.inception_v3(num_classes=10, aux_logits=True, init_weights=False).train()
    loss = lambda out, t: nn.functional.cross_entropy(out.logits, t) + 0.4 * nn.functional.cross_entropy(out.aux_logits, t)
    check_same_training_step(model, (torch.randn(2, 3, 299, 299),), loss, torch.randint(0, 10, (2,)))


def test_transformer_encoder():
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=3), nn.Linear(32, 8)).train()
    loss = lambda out, t: nn.functional.mse_loss(out, t)
    check_same_training_step(model, (torch.randn(10, 4, 32),), loss, torch.randn(10, 4, 8))


def test_lstm_language_model():
    model = LstmLm().train()
    tokens = torch.randint(0, 50, (6, 3))
    check_same_training_step(model, (tokens,), nn.CrossEntropyLoss(), torch.randint(0, 50, (18,)))


def test_gpt_style_decoder():
    model = TinyGpt().train()
    loss = lambda logits, t: nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1))
    check_same_training_step(model, (torch.randint(0, 97, (2, 12)),), loss, torch.randint(0, 97, (2, 12)))


def test_one_device_moves_nothing_and_bad_maps_are_input_errors():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    placed = pt.place(copy.deepcopy(model), {"": "gpu:0"}, device_map={"gpu:0": "cpu"})
    placed(torch.randn(3, 4)).sum().backward()
    assert placed.moves == 0 and placed.device == torch.device("cpu")
    with pytest.raises(pl.InputError, match="no submodule of this name"):
        pt.place(copy.deepcopy(model), {"5": "cpu"})
    if not torch.cuda.is_available():
        with pytest.raises(pl.InputError, match="device_map"):
            pt.place(copy.deepcopy(model), {"": "cuda:0"})
    with pytest.raises(pl.InputError, match="module map"):
        pt.place(copy.deepcopy(model), ["cuda:0"])


# The learners' best placements, not a fixed split: each model captured, searched on three machines by
# critpath and post (grouping module, the default for a captured graph), each learner's best exported
# with `placelab export-placement --format torch`, simulated back from the map (the learner's step),
# applied with place() and trained one step on the CPU against the unplaced model.
MACHINES = ("k80x4", "dgx1", "h100x8")
SCENARIO = """name: {name}
graph: {graph}
machine: {machine}
devices: gpus
samples: 36
seeds: 1
op_level: false
learners:
  critpath: {{}}
  post: {{}}
baselines: [single_gpu, heft]
"""


def learned_maps(cli, tmp_path, name, model, inputs, loss, target):
    g = pt.capture(model, inputs, loss, target, optimizer="momentum")
    graph = tmp_path / f"{name}.json"
    g.save(graph)
    op_names = [op["name"] for op in g.ops]
    for machine in MACHINES:
        scenario = tmp_path / f"{name}-{machine}.yaml"
        scenario.write_text(SCENARIO.format(name=f"{name}-{machine}", graph=graph, machine=machine))
        out = tmp_path / f"{name}-{machine}"
        subprocess.run([cli, "run", str(scenario), "-q", "-o", str(out)], check=True, capture_output=True)
        devices = pl.Machine.preset(machine).device_names
        for learner in ("critpath", "post"):
            run = json.loads((out / "runs" / f"{learner}-seed1.json").read_text())
            placement = tmp_path / f"{name}-{machine}-{learner}.json"
            placement.write_text(json.dumps({"format": "placelab-placement", "version": 1, "placement": {
                op: devices[d] for op, d in zip(op_names, run["best_placement"])}}))
            modules = tmp_path / f"{name}-{machine}-{learner}-modules.json"
            subprocess.run([cli, "export-placement", str(placement), "--format", "torch", "--graph", str(graph), "-o",
                            str(modules)], check=True, capture_output=True)
            simulated = subprocess.run([cli, "simulate", "--graph", str(graph), "--machine", machine, "--placement",
                                        str(modules), "--json"], check=True, capture_output=True, text=True)
            assert json.loads(simulated.stdout)["step_time_s"] == pytest.approx(run["best_s"], rel=1e-12), (machine, learner)
            yield machine, learner, json.loads(modules.read_text())


LEARNED_CASES = {
    "resnet50": lambda tv: (tv.models.resnet50(num_classes=10).train(), (torch.randn(2, 3, 64, 64),),
                            nn.CrossEntropyLoss(), torch.randint(0, 10, (2,))),
    "inception_v3": lambda tv: (tv.models.inception_v3(num_classes=10, aux_logits=True, init_weights=False).train(),
                                (torch.randn(2, 3, 299, 299),),
                                lambda out, t: nn.functional.cross_entropy(out.logits, t)
                                + 0.4 * nn.functional.cross_entropy(out.aux_logits, t),
                                torch.randint(0, 10, (2,))),
    "transformer": lambda tv: (nn.Sequential(nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0), 3),
                                             nn.Linear(32, 8)).train(),
                               (torch.randn(10, 4, 32),), lambda out, t: nn.functional.mse_loss(out, t),
                               torch.randn(10, 4, 8)),
    "lstm_lm": lambda tv: (LstmLm().train(), (torch.randint(0, 50, (6, 3)),), nn.CrossEntropyLoss(),
                           torch.randint(0, 50, (18,))),
    "gpt": lambda tv: (TinyGpt().train(), (torch.randint(0, 97, (2, 12)),),
                       lambda logits, t: nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1)),
                       torch.randint(0, 97, (2, 12))),
}


@pytest.mark.parametrize("name", list(LEARNED_CASES))
def test_learned_placements_train_as_the_unplaced_model(name, cli, tmp_path, torchvision):
    torch.manual_seed(0)
    model, inputs, loss, target = LEARNED_CASES[name](torchvision)
    cases = list(learned_maps(cli, tmp_path, name, model, inputs, loss, target))
    assert len(cases) == 6
    # The unplaced step once; each distinct map's placed step against it.
    torch.manual_seed(1)
    want_loss, want_grads = one_step(copy.deepcopy(model), inputs, loss, target)
    distinct = {json.dumps(mapping, sort_keys=True): mapping for _, _, mapping in cases}
    for mapping in distinct.values():
        placed = pt.place(copy.deepcopy(model), mapping, device_map=CPU_FOR_ALL)
        torch.manual_seed(1)
        got_loss, got_grads = one_step(placed, inputs, loss, target.to(placed.device))
        assert (placed.moves > 0) == (len(set(mapping.values())) > 1), mapping
        torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=0)
        got_grads = {n.removeprefix("model."): g for n, g in got_grads.items()}
        assert got_grads.keys() == want_grads.keys()
        for param, grad in want_grads.items():
            torch.testing.assert_close(got_grads[param], grad, rtol=1e-5, atol=1e-7, msg=param)
