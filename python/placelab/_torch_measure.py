"""Real training steps of a model: ``python3 -m placelab.torch measure`` times the model placed by a
module map; ``python3 -m placelab.torch profile`` times every op of its captured graph on this CPU,
and the host's cost of issuing one, for the simulator (docs/python.md, "Measuring a placement,
profiling the CPU").

    python3 -m placelab.torch measure --model models.py:tiny_gpt --placement modules.json \\
        --device-map cuda:1=cpu --check -o result.json
    python3 -m placelab.torch profile --model models.py:tiny_gpt -o tiny.json --machine-out cpu.yaml

measure: ``place()`` puts the model on the map's devices, the spec's optimizer is built on the
placed parameters, and each step is ``zero_grad``, forward, loss, ``backward()``, ``step()``. Every
CUDA device the placement uses is synchronised before the clock starts and again before it stops,
so a step's time is the wall time of a whole, finished step (on the CPU, ``perf_counter`` around it).

profile: capture's recorder on the CPU (real compute) with ``perf_counter`` around each aten op's
call, the optimizer's aten ops charged to their parameters' update ops, and, interleaved with
those steps, plain training steps (no dispatch mode, no hooks). What the plain step takes beyond
the ops' own times is the host's: Python, the dispatcher, autograd's engine; spread over the ops
the host issues it is the machine's ``dispatch_s`` (docs/simulator.md, "Eager execution").

Only the command line (``placelab.torch.main``) calls this module; it prints nothing.
"""

from __future__ import annotations

import copy
import json
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ._placelab import InputError
from .frameworks import torch_device
from .torch import (_OPTIMIZERS, CapturedGraph, _copy_model, _lower, _ModelSpec, _optimizer_for, _Recorder,
                    _step_errors, _storage_key, _to_device, _write_output, place)

MACHINE_NAME = "localhost-torch"


# ---------------------------------------------------------------------------------------------
# measure


def measure(spec: _ModelSpec, mapping: Mapping[str, str], *, where: str, device_map: Mapping[str, str] | None = None,
            missing_devices: str | None = None, steps: int = 6, check: bool = False) -> dict:
    """``steps`` real training steps of ``spec``'s model placed by ``mapping`` (module path ->
    device, ``place()``'s rule), the first a warm-up; ``device_map`` runs a map's device on
    another; ``missing_devices`` runs every ``cuda:N`` of the map that torch lacks here and
    ``device_map`` does not name there. ``check``: first one step of the unplaced and of the placed
    model, from identical copies and seeds, compared. Returns the result JSON's dict
    (docs/python.md lists its keys); seconds are wall seconds. ``where`` names the map in messages
    (``--placement m.json``). Raises InputError for a map or device this machine cannot run (a
    ``cuda:N`` torch lacks and nothing maps: the message says to pass --device-map) or a failing
    step. Moves ``spec.model`` to the map's devices."""
    _check_steps(steps)
    device_map = {torch_device(k): torch_device(v) for k, v in (device_map or {}).items()}
    logical = {torch_device(d) for d in mapping.values()}
    if missing_devices is not None:
        _map_missing(logical, device_map, missing_devices)
    _check_devices(logical, device_map, where)
    numerics = _numerics(spec, mapping, device_map, where) if check else None
    placed = _place(spec.model, mapping, device_map, where)
    opt = _OPTIMIZERS[spec.optimizer]([p for p in placed.parameters() if p.requires_grad])
    cuda = sorted({torch.device(d) for d in placed.devices.values() if d.startswith("cuda")}, key=str)
    torch.manual_seed(0)
    times = []
    with _user_step("measure"):
        for _ in range(steps):
            times.append(_timed_step(placed, opt, spec, cuda))
    return {
        "steps_s": times[1:],
        "median_s": statistics.median(times[1:]),
        "warmup_s": times[0],
        "devices": sorted(set(placed.devices.values()), key=_device_order),
        "moves": placed.moves,
        "mapped": {k: v for k, v in sorted(device_map.items()) if k in logical},
        "numerics": numerics,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


# The C++ side's rule for the steps of one measured run (check_measured_steps, cpu_executor.h),
# which the CLI's torch backend applies before it starts this module.
_MAX_MEASURED_STEPS = 10_000


def _check_steps(steps: int) -> None:
    if not 2 <= steps <= _MAX_MEASURED_STEPS:
        raise InputError(f"--steps = {steps}: must be in [2, {_MAX_MEASURED_STEPS}] (the first step is warm-up)")


def _visible_gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _lacks(name: str) -> bool:
    """Whether ``name`` is a CUDA device torch does not have here (other names: torch judges)."""
    try:
        device = torch.device(name)
    except RuntimeError:
        return False
    return device.type == "cuda" and (device.index or 0) >= _visible_gpus()


def _map_missing(logical: set[str], device_map: dict[str, str], missing_devices: str) -> None:
    """Adds ``name -> missing_devices`` to ``device_map`` for each CUDA device of ``logical`` that
    torch lacks here and ``device_map`` does not name."""
    target = torch_device(missing_devices)
    try:
        torch.device(target)
    except RuntimeError as e:
        raise InputError(f"--missing-devices {missing_devices}: {e}") from None
    if _lacks(target):
        raise InputError(f"--missing-devices {missing_devices}: torch has no device {target} here "
                         f"({_visible_gpus()} GPUs visible)")
    for name in sorted(logical - set(device_map)):
        if _lacks(name):
            device_map[name] = target


def _check_devices(logical: set[str], device_map: Mapping[str, str], where: str) -> None:
    """Every device of the map (after ``device_map``) must be one torch has here."""
    for name in sorted(logical):
        physical = device_map.get(name, name)
        try:
            torch.device(physical)
        except RuntimeError as e:
            raise InputError(f"{where}: device {physical!r}: {e}") from None
        if _lacks(physical):
            if name in device_map:
                raise InputError(f"--device-map {name}={physical}: torch has no device {physical} here "
                                 f"({_visible_gpus()} GPUs visible)")
            raise InputError(f"{where}: {name}: torch has no such device here ({_visible_gpus()} GPUs visible): "
                             f"pass --device-map {name}=cpu (or another device this machine has), or "
                             f"--missing-devices cpu")


def _place(model, mapping, device_map, where):
    try:
        return place(model, dict(mapping), device_map=device_map)
    except InputError as e:
        raise InputError(f"{where}: {e}") from e


def _device_order(name: str):
    device = torch.device(name)
    return device.type != "cpu", device.type, device.index or 0


def _loss_value(spec: _ModelSpec, output, target):
    return spec.loss(output) if target is None else spec.loss(output, target)


def _target_on(spec: _ModelSpec, device):
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, spec.target)


def _timed_step(placed, opt, spec: _ModelSpec, cuda: list) -> float:
    # The inputs and target start where the factory made them (the CPU) and move to their first
    # users inside the step, as the graph's IteratorGetNext and its copies have it.
    for device in cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    output = placed(*spec.example_inputs)
    _loss_value(spec, output, _target_on(spec, placed.device)).backward()
    opt.step()
    for device in cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _user_step(what: str):
    """Reports a failure of the user's training step as bad input, torch's error as the cause."""
    return _step_errors(f"{what}: the training step failed")


def _numerics(spec: _ModelSpec, mapping, device_map, where: str) -> dict:
    """Loss and gradients of one step of the placed model against the unplaced one's, from
    identical copies and seeds: relative errors (norm of the difference / norm of the reference,
    per parameter; a gradient one side lacks counts as zeros)."""
    reference = copy.deepcopy(spec.model)
    placed = _place(copy.deepcopy(spec.model), mapping, device_map, where)
    with _user_step("measure --check"):
        torch.manual_seed(0)
        want_loss, want = _gradients(reference, spec, spec.target)
        torch.manual_seed(0)
        got_loss, got = _gradients(placed, spec, _target_on(spec, placed.device))
    got = {name.removeprefix("model."): g for name, g in got.items()}
    worst, worst_error = "", 0.0
    for name, p in reference.named_parameters():
        if name not in want and name not in got:
            continue
        error = _relative_error(got.get(name), want.get(name, torch.zeros_like(p)))
        if not worst or error > worst_error or (math.isnan(error) and not math.isnan(worst_error)):
            worst, worst_error = name, error  # a NaN is the worst
    return {"loss_rel_error": _relative_error(got_loss, want_loss), "max_grad_rel_error": worst_error,
            "worst_parameter": worst}


def _gradients(model, spec: _ModelSpec, target):
    model.zero_grad(set_to_none=True)
    value = _loss_value(spec, model(*spec.example_inputs), target)
    value.backward()
    return value.detach(), {n: p.grad.detach() for n, p in model.named_parameters() if p.grad is not None}


def _relative_error(got, want: torch.Tensor) -> float:
    want = want.detach().double().cpu()
    got = torch.zeros_like(want) if got is None else got.detach().double().cpu()
    diff = float((got - want).norm())
    scale = float(want.norm())
    return diff / scale if scale > 0 else diff


def _finite(value):
    """``value`` with every non-finite float as None, so that the JSON is strict (a NaN loss)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _parse_device_map(items: list[str]) -> dict[str, str]:
    device_map = {}
    for item in items:
        src, eq, dst = item.partition("=")
        if not eq or not src.strip() or not dst.strip():
            raise InputError(f"--device-map {item}: must be FROM=TO, e.g. cuda:1=cpu")
        device_map[torch_device(src.strip())] = torch_device(dst.strip())
    return device_map


def _read_module_map(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(f"--placement {path}: cannot read: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise InputError(f"--placement {path}:{e.lineno}: not JSON: {e.msg}") from e
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError(f"--placement {path}: must be a module map {{module path: device}}, as placelab "
                         f"export-placement --format torch writes it")
    return data


def measure_command(args, spec: _ModelSpec) -> str:
    """``measure``: runs ``measure()`` as the flags say, writes the result JSON atomically and
    returns the summary line."""
    device_map = _parse_device_map(args.device_map)
    if args.placement is not None:
        mapping, where = _read_module_map(args.placement), f"--placement {args.placement}"
    else:
        mapping, where = {"": args.all_on}, f"--all-on {args.all_on}"
    result = measure(spec, mapping, where=where, device_map=device_map, missing_devices=args.missing_devices,
                     steps=args.steps, check=args.check)
    _write_output(args.output, json.dumps(_finite(result), indent=2) + "\n")
    line = (f"{args.output}: median {_ms(result['median_s'])} a step over {len(result['steps_s'])} steps "
            f"(warm-up {_ms(result['warmup_s'])}) on {', '.join(result['devices'])}, "
            f"{result['moves']} values moved per forward")
    n = result["numerics"]
    if n is not None:
        line += (f"; check: loss relative error {n['loss_rel_error']:.1e}, largest gradient relative error "
                 f"{n['max_grad_rel_error']:.1e} ({n['worst_parameter'] or 'no gradients'})")
    return line


# ---------------------------------------------------------------------------------------------
# profile


@dataclass
class Profile:
    """What ``profile()`` measured. Seconds are wall seconds of this host; medians over the counted
    steps (all but the first)."""

    graph: CapturedGraph          # the capture; every op but the parameters has measured_s {"cpu": s}
    counted_steps: int            # steps the medians are over
    op_sum_s: float               # sum over the graph's ops of their median times
    plain_steps_s: list           # the counted plain training steps (no dispatch mode, no hooks)
    host_ops: int                 # ops the host issues: every op but the parameters (VariableV2)
    dispatch_s: float             # max(0, plain step median - op_sum_s) / host_ops, at most 1 s
    peak_flops: float             # FLOP/s of the best float32 GEMM, m = n = k = 256 (achieved, not a datasheet's)
    memory_bandwidth_Bps: float   # bytes read + written per second by the best copy of 32 MiB
    memory_bytes: int             # the host's RAM

    @property
    def plain_step_s(self) -> float:
        """The median plain training step, seconds."""
        return statistics.median(self.plain_steps_s)

    @property
    def ops_timed(self) -> int:
        """Ops of the graph that have a measured time."""
        return sum(1 for op in self.graph.ops if "measured_s" in op)

    def machine_yaml(self) -> str:
        """A one-CPU machine file (docs/machines.md) named ``localhost-torch``: device ``cpu:0``
        with the measured ``dispatch_s``, this host's RAM, and the GEMM and copy figures."""
        cpu = _cpu_model()
        threads = torch.get_num_threads()
        return "\n".join([
            f"# {MACHINE_NAME}: this host's CPU as PyTorch {torch.__version__} runs a training step on {threads} "
            f"thread(s),",
            f"# from `python3 -m placelab.torch profile` of {self.graph.name} over {self.counted_steps} counted "
            f"steps (docs/python.md,",
            "# \"Measuring a placement, profiling the CPU\"). The graph written with it holds every op's own time",
            "# (measured_s); this file holds the host's cost of issuing one (dispatch_s).",
            f"name: {MACHINE_NAME}",
            f"description: {json.dumps(f'{cpu}, PyTorch {torch.__version__} on {threads} thread(s), profiled')}",
            "devices:",
            "  - name: cpu:0",
            "    kind: cpu",
            f"    model: {json.dumps(cpu)}",
            f"    peak_flops: {_yaml_number(self.peak_flops)}"
            "  # best of 5 float32 GEMMs, m = n = k = 256, through torch: achieved, not a datasheet peak",
            f"    memory_bandwidth_Bps: {_yaml_number(self.memory_bandwidth_Bps)}"
            "  # best of 5 copies of 32 MiB: bytes read + written per second",
            f"    memory_bytes: {self.memory_bytes}  # the host's RAM: physical pages x page size",
            "    streams: 1  # PyTorch runs a CPU op on the thread that issues it, one at a time",
            "    launch_overhead_s: 0  # each op's measured_s is its whole time",
            f"    dispatch_s: {_yaml_number(self.dispatch_s)}  # (plain step median {_ms(self.plain_step_s)} - "
            f"sum of op medians {_ms(self.op_sum_s)}) / {self.host_ops} issued ops",
            "",
        ])


def profile(spec: _ModelSpec, *, steps: int = 5) -> Profile:
    """Times every op of ``spec``'s training step, as ``capture(..., device="cpu")`` captures it,
    over ``steps`` steps (the first a warm-up), and as many plain steps interleaved with them.
    The user's model is not changed (a copy trains). Raises InputError for a step that fails or
    whose ops differ from one step to the next (then they cannot be timed one to one)."""
    _check_steps(steps)
    start = time.perf_counter()
    work = _copy_model(spec.model, "cpu")
    opt = _optimizer_for(spec.optimizer, spec.model, work)
    ops: list[dict] = []
    edges: list[dict] = []
    origins: list[int] = []
    signature: list[tuple[str, str]] = []
    op_times: list[list[float]] = []  # per counted step, per op (0 for the parameters)
    plain: list[float] = []
    with _user_step("profile"):
        for step in range(steps):
            rec, seconds = _profiled_step(work, opt, spec)
            if step == 0:
                ops, edges = _lower(rec, origins)
                signature = [(r.kind, r.name) for r in rec.records]
                shares = _shares(ops, origins)
            else:
                _check_same_ops(signature, rec.records, step)
                op_times.append([seconds.get(origin, 0.0) * share for origin, share in zip(origins, shares)])
            del rec  # and with it the storages it pinned
            plain.append(_plain_step(work, opt, spec))
    host = [i for i, op in enumerate(ops) if op["type"] != "VariableV2"]
    medians = {i: statistics.median(t[i] for t in op_times) for i in host}
    ops = [_with_measured(op, medians[i]) if i in medians else op for i, op in enumerate(ops)]
    op_sum_s = sum(medians.values())
    plain_step_s = statistics.median(plain[1:])
    dispatch_s = min(1.0, max(0.0, (plain_step_s - op_sum_s) / len(host))) if host else 0.0
    params = sum(p.numel() for p in spec.model.parameters() if p.requires_grad)
    graph = CapturedGraph(spec.name or type(spec.model).__name__, params, ops, edges, time.perf_counter() - start)
    return Profile(graph, steps - 1, op_sum_s, plain[1:], len(host), dispatch_s, _gemm_flops_per_s(),
                   _copy_bytes_per_s(), _ram_bytes())


class _TimedRecorder(_Recorder):
    """capture's recorder on the CPU, also timing each aten op it records: ``run_s[record]`` is
    the seconds of the op's own call (``perf_counter`` around it, the recorder's bookkeeping
    outside)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__(model, "cpu")
        self.run_s: dict[int, float] = {}
        self._last_s = 0.0

    def _run(self, func, name, args, kwargs):
        start = time.perf_counter()
        out = func(*args, **kwargs)
        self._last_s = time.perf_counter() - start
        return out

    def _record(self, name, args, kwargs, out) -> None:
        super()._record(name, args, kwargs, out)
        self.run_s[len(self.records) - 1] = self._last_s


class _UpdateTimer(TorchDispatchMode):
    """Times the aten ops of ``optimizer.step()`` and charges each to the parameter it works on:
    the one whose tensor (the parameter, its gradient, its state, or a temporary made from those)
    it reads. An op reading several parameters' tensors (a foreach kernel) or none is shared among
    them (or all) by element count, the update kernels being elementwise."""

    def __init__(self, params: list, opt: torch.optim.Optimizer):
        super().__init__()
        self.owner: dict[int, int] = {}  # storage key -> parameter index
        for i, p in enumerate(params):
            tensors = [p, p.grad, *[v for v in opt.state.get(p, {}).values() if isinstance(v, torch.Tensor)]]
            for t in tensors:
                if t is not None:
                    self.owner[_storage_key(t)] = i
        self.numel = [p.numel() for p in params]
        self.seconds = [0.0] * len(params)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        start = time.perf_counter()
        out = func(*args, **kwargs)
        spent = time.perf_counter() - start
        read = {self.owner[_storage_key(t)] for t in tree_flatten((args, kwargs))[0]
                if isinstance(t, torch.Tensor) and _storage_key(t) in self.owner}
        charged = sorted(read) if read else range(len(self.numel))
        total = sum(self.numel[i] for i in charged) or 1
        for i in charged:
            self.seconds[i] += spent * self.numel[i] / total
        if len(read) == 1:
            (i,) = read
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.owner[_storage_key(t)] = i
        return out


def _profiled_step(work: torch.nn.Module, opt: torch.optim.Optimizer, spec: _ModelSpec):
    """One recorded step of ``work``, exactly as capture() records it; returns the recorder and
    the seconds of each record (an aten op's call, the inputs' copy for the input op, the
    optimizer's ops for an update op)."""
    work.zero_grad(set_to_none=True)
    start = time.perf_counter()
    inputs = tree_map(lambda t: _to_device(t, "cpu"), spec.example_inputs)
    target = tree_map(lambda t: _to_device(t, "cpu"), spec.target)
    input_s = time.perf_counter() - start
    rec = _TimedRecorder(work)
    rec.add_input_op([t for t in tree_flatten((inputs, target))[0] if isinstance(t, torch.Tensor)])
    rec.run_step(inputs, spec.loss, target)
    params = [p for group in opt.param_groups for p in group["params"]]
    timer = _UpdateTimer(params, opt)
    with timer:
        opt.step()
    rec.add_update_ops(opt)
    update_s = {id(p): s for p, s in zip(params, timer.seconds)}
    by_path = dict(work.named_parameters())
    seconds = dict(rec.run_s)
    for index, r in enumerate(rec.records):
        if r.kind == "input":
            seconds[index] = input_s
        elif r.kind == "update":
            seconds[index] = update_s[id(by_path[r.name])]
    return rec, seconds


def _plain_step(work: torch.nn.Module, opt: torch.optim.Optimizer, spec: _ModelSpec) -> float:
    """One training step as a training loop runs it, inputs copied as the graph's input op does."""
    start = time.perf_counter()
    inputs = tree_map(lambda t: _to_device(t, "cpu"), spec.example_inputs)
    target = tree_map(lambda t: _to_device(t, "cpu"), spec.target)
    work.zero_grad(set_to_none=True)
    _loss_value(spec, work(*inputs), target).backward()
    opt.step()
    return time.perf_counter() - start


def _check_same_ops(signature: list, records: list, step: int) -> None:
    now = [(r.kind, r.name) for r in records]
    if now == signature:
        return
    for i, (want, got) in enumerate(zip(signature, now)):
        if want != got:
            raise InputError(f"profile: step {step + 1} ran {got[1]} where step 1 ran {want[1]} (record {i}): the ops "
                             f"must be the same every step to be timed one to one")
    raise InputError(f"profile: step {step + 1} ran {len(now)} ops and parameters, step 1 {len(signature)}: the ops "
                     f"must be the same every step to be timed one to one")


def _shares(ops: list[dict], origins: list[int]) -> list[float]:
    """Each op's share of its record's time: 1 for all but the ops of a record that lowers to
    several (a convolution's backward: input gradient, filter gradient, bias Sum), which split
    the one aten call's time in proportion to their FLOPs as the kernel signature gives them."""
    weights = [_flops_estimate(op) for op in ops]
    totals: dict[int, float] = {}
    counts: dict[int, int] = {}
    for origin, w in zip(origins, weights):
        totals[origin] = totals.get(origin, 0.0) + w
        counts[origin] = counts.get(origin, 0) + 1
    return [w / totals[o] if totals[o] > 0 else 1.0 / counts[o] for o, w in zip(origins, weights)]


def _flops_estimate(op: dict) -> float:
    if "flops" in op:  # grouped and dilated convolutions carry theirs
        return float(op["flops"])
    k = op["kernel"]
    if k["class"].startswith("conv2d"):
        ho = (k["h"] + 2 * k["pad"] - k["r"]) // k["stride"] + 1
        wo = (k["w"] + 2 * k["pad"] - k["s"]) // k["stride"] + 1
        return 2.0 * k["n"] * k["k"] * k["c"] * k["r"] * k["s"] * ho * wo
    if k["class"] == "gemm":
        return 2.0 * k["m"] * k["n"] * k["k"] * k["batch"]
    return float(k.get("elements", 1))


def _with_measured(op: dict, seconds: float) -> dict:
    # measured_s goes where the C++ writer puts it: after the kernel fields, before module and call.
    out = {k: v for k, v in op.items() if k not in ("module", "call")}
    out["measured_s"] = {"cpu": seconds}
    out["module"], out["call"] = op["module"], op["call"]
    return out


def _gemm_flops_per_s(n: int = 256) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # noqa: B018 - warm-up
    best = min(_timed(lambda: a @ b) for _ in range(5))
    return 2.0 * n ** 3 / max(best, 1e-9)


def _copy_bytes_per_s() -> float:
    src = torch.ones(8 << 20)  # 32 MiB of float32
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(_timed(lambda: dst.copy_(src)) for _ in range(5))
    return 2.0 * src.numel() * src.element_size() / max(best, 1e-9)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError) as e:
        raise InputError(f"profile: cannot read this host's memory size (sysconf): {e}") from e


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _yaml_number(x: float) -> str:
    # The machine reader's numbers are C++ from_chars': no '+' in an exponent.
    return repr(float(x)).replace("e+", "e")


def profile_command(args, spec: _ModelSpec) -> str:
    """``profile``: runs ``profile()``, writes the graph and the machine file atomically and
    returns the summary line."""
    p = profile(spec, steps=args.steps)
    _write_output(args.output, p.graph.to_json())
    _write_output(args.machine_out, p.machine_yaml())
    return (f"{args.output}: {p.ops_timed} ops timed, sum of op times {_ms(p.op_sum_s)}, plain step median "
            f"{_ms(p.plain_step_s)} over {p.counted_steps} steps, dispatch_s {p.dispatch_s * 1e6:.2f} us "
            f"({p.host_ops} issued ops); {args.machine_out}: machine {MACHINE_NAME}")

