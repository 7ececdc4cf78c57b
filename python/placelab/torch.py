"""A user's PyTorch training step as a placelab graph: ``placelab.torch.capture``.

    import torch, torchvision
    import placelab.torch as pt

    model = torchvision.models.resnet50()
    g = pt.capture(model, example_inputs=(torch.randn(8, 3, 224, 224),), loss=torch.nn.CrossEntropyLoss(),
                   target=torch.randint(0, 1000, (8,)), optimizer="sgd")
    g.save("r50.json")      # placelab graph JSON, version 3: placelab simulate --graph r50.json ...

or ``python3 -m placelab.torch capture --model torchvision:resnet50 --batch 8 --image 224 --optimizer sgd
-o r50.json`` (``--model my_models.py:make``: a factory returning the model, inputs, loss and target).
``measure`` and ``profile`` (``_torch_measure.py``) run real training steps of the same specs: the
model placed by a module map, and every captured op timed on this CPU.

How (docs/python.md, "Capturing a PyTorch training step", has the figures): one training step --
``loss(model(*inputs), target).backward()``, then ``optimizer.step()`` -- runs on a copy of the
model whose parameters live on PyTorch's ``meta`` device, under a ``TorchDispatchMode`` that sees
every aten op the CPU path dispatches below autograd, forward and backward, in program order.
Meta tensors have real shapes and dtypes but no data, so nothing is computed (ResNet-50 at batch
8 captures in well under a second) and the user's model is not touched. Tracing (``torch.fx``,
``torch.jit``) was not chosen: it sees neither the backward nor the optimizer, and fails on
data-dependent Python control flow that eager execution runs. Capturing on ``device="cpu"``
computes for real, for models that read tensor values (``.item()``).

- Modules: forward pre/post hooks keep the stack of running modules and count each module's calls;
  an op belongs to the innermost module running when it was dispatched.
- Backward: the autograd node each forward op created is tagged with that op's (module, call).
  PyTorch 1.13 has no ``torch._C._current_autograd_node``; instead every node reachable from the
  loss gets a post-hook, and the CPU engine runs nodes one at a time on the calling thread, so the
  ops dispatched since the previous hook are the node's. The engine's own gradient sums (a tensor
  read twice) run after a node's hook; they are recognised as adds reading one of the gradients
  the node just produced and belong to the node that receives the sum (the producer's module, as
  the zoo's ``AddN``). ``AccumulateGrad`` belongs to the parameter's owner.
- Data edges follow storages: a view, reshape, transpose, expand or detach is no op (its output
  shares its base's storage, so reading it reads the base's producer); an in-place op becomes the
  storage's new producer (a new version). Storages are pinned for the capture so that their ids
  are not reused.
- The optimizer is one update op per parameter (``ApplyMomentum`` ...), as the model zoo's PyTorch
  form has it (docs/models.md), with the state ``optimizer.step()`` created as its persistent bytes.

Deviations, stated: the ops are those of PyTorch's CPU path, which is also the meta device's --
dropout is ``bernoulli_``, ``div_`` and ``mul`` where CUDA runs one ``native_dropout``, and an LSTM
is its per-step matmuls and gates where CUDA runs cuDNN's fused RNN; batch norm maps to
``FusedBatchNorm`` either way. Ops of the loss belong to module ``""`` (the model), forward or
backward by when they ran. Write-after-read hazards of in-place ops are not edges (program order
keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.util
import itertools
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ._placelab import InputError
from ._torch_place import PlacedModel, place  # noqa: F401  (placelab.torch.place)

GRAPH_VERSION = 3

# The optimizer names of the model zoo and `placelab import` (models/src/builder.cpp), as torch.optim
# builds them; the state each keeps per parameter is what the update ops hold.
_OPTIMIZERS: dict[str, Callable[[Any], torch.optim.Optimizer]] = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1),                     # ApplyGradientDescent, no state
    "momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),  # ApplyMomentum, one buffer
    # TF Inception's RMSProp (decay 0.9, momentum 0.9, epsilon 1): mean square and momentum.
    "rmsprop": lambda params: torch.optim.RMSprop(params, lr=0.045, alpha=0.9, eps=1.0, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=1e-3),                  # ApplyAdam, two moments
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-3),
}


# ---------------------------------------------------------------------------------------------
# The result.


class CapturedGraph:
    """One captured training step: placelab graph JSON (docs/formats.md, version 3) in memory.

    ``ops`` and ``edges`` are the file's lists of dicts, in program order; ``save`` writes them.
    """

    def __init__(self, name: str, parameters: int, ops: list[dict], edges: list[dict], capture_s: float):
        self.name = name
        self.parameters = parameters  # trainable parameter count, as torch counts it
        self.ops = ops
        self.edges = edges
        self.capture_s = capture_s  # wall seconds the capture took

    @property
    def num_ops(self) -> int:
        """Ops in the graph (parameters, the input, forward, backward and update ops)."""
        return len(self.ops)

    @property
    def num_edges(self) -> int:
        """Edges in the graph, one per (producer op, storage) an op reads."""
        return len(self.edges)

    def to_json(self) -> str:
        """The graph file's text, one op or edge per line (as the C++ writer lays files out)."""
        head = {"format": "placelab-graph", "version": GRAPH_VERSION, "name": self.name,
                "execution": "eager", "parameters": self.parameters}
        lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
        lines.append('  "ops": [')
        lines.append(",\n".join("    " + json.dumps(op) for op in self.ops))
        lines.append("  ],")
        lines.append('  "edges": [')
        lines.append(",\n".join("    " + json.dumps(e) for e in self.edges))
        lines.append("  ]")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def save(self, path: str | os.PathLike) -> None:
        """Writes ``to_json()`` to ``path`` atomically (``_write_text_atomically``)."""
        _write_text_atomically(path, self.to_json())

    def to_graph(self):
        """The graph as a ``placelab.Graph`` (read back through the C++ reader, which validates
        it); needs a placelab whose reader knows version 3."""
        from . import Graph

        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "captured.json")
            self.save(p)
            return Graph.from_json(p)

    def __repr__(self) -> str:
        return f"CapturedGraph({self.name!r}, {self.num_ops} ops, {self.num_edges} edges, {self.parameters} parameters)"


def _write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``,
    so a reader never sees half a file; the file gets the mode any new file gets (the umask's), not
    the temporary file's private 0600. OSError (no such folder, no permission) propagates."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.splitext(path)[1], dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def capture(model: torch.nn.Module, example_inputs, loss: Callable, target=None, optimizer="sgd", *,
            name: str | None = None, device: str = "meta") -> CapturedGraph:
    """Captures one training step of ``model`` -- forward on ``example_inputs``, ``loss``,
    ``backward()``, ``optimizer.step()`` -- as a placelab graph, without changing ``model``.

    ``example_inputs``: a tensor or a tuple of positional arguments (their shapes and dtypes are
    used). ``loss``: called as ``loss(output, target)`` when ``target`` is given, else
    ``loss(output)``; it must return a scalar tensor. ``optimizer``: the zoo's names, ``"sgd"``
    (plain), ``"momentum"`` (0.9), ``"rmsprop"``, ``"adam"``, ``"adamw"``, or a
    ``torch.optim.Optimizer`` built on ``model.parameters()``. ``device``: ``"meta"`` (no compute,
    the default) or ``"cpu"`` (computes for real, for models that read tensor values). The model
    runs in the mode it is in (call ``model.train()`` first, as a training step does).
    Returns the graph, its ops in program order (docs/python.md lists what they are).
    Raises placelab.InputError naming the construct that cannot be captured (an aten op with no
    rule, a 3-D convolution, ...) with its module path, or the argument that is wrong.
    """
    start = time.perf_counter()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"capture: model is a {type(model).__name__}: must be a torch.nn.Module")
    if device not in ("meta", "cpu"):
        raise InputError(f"capture: device = {device!r}: must be 'meta' or 'cpu'")
    if not callable(loss):
        raise InputError(f"capture: loss is a {type(loss).__name__}: must be callable as loss(output[, target])")
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    work = _copy_model(model, device)
    opt = _optimizer_for(optimizer, model, work)
    rec = _Recorder(work, device)
    moved = tree_map(lambda t: _to_device(t, device), inputs)
    moved_target = tree_map(lambda t: _to_device(t, device), target)
    rec.add_input_op([t for t in tree_flatten((moved, moved_target))[0] if isinstance(t, torch.Tensor)])
    with _step_errors(f"capture: the training step failed on the {device} device", lambda e: _meta_hint(device, e)):
        rec.run_step(moved, loss, moved_target)
        opt.step()
    rec.add_update_ops(opt)
    ops, edges = _lower(rec)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return CapturedGraph(name or type(model).__name__, params, ops, edges, time.perf_counter() - start)


@contextlib.contextmanager
def _step_errors(failed: str, hint: Callable[[Exception], str] = lambda e: ""):
    """A failure of the user's training step (capture, measure, profile) as bad input: ``failed``
    says what failed and where, torch's error follows and stays the cause, ``hint(e)`` adds what
    helps for an error it recognises."""
    try:
        yield
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the user's code is reported with its cause
        raise InputError(f"{failed}: {type(e).__name__}: {e}{hint(e)}") from e


def _meta_hint(device: str, e: Exception) -> str:
    # On the meta device an error that mentions it is a value read or a missing kernel.
    meta = device == "meta" and ("meta" in str(e).lower() or isinstance(e, NotImplementedError))
    return "; a model that reads tensor values needs capture(..., device='cpu')" if meta else ""


# ---------------------------------------------------------------------------------------------
# The model copy and the optimizer on it.


def _to_device(t, device):
    # A copy even on the CPU: the model may write its inputs in place.
    return t.detach().to(device, copy=True).requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t


def _copy_model(model: torch.nn.Module, device: str) -> torch.nn.Module:
    # Parameters and buffers are replaced in the deepcopy's memo, so a meta copy never copies data.
    memo: dict[int, Any] = {}
    for t in itertools.chain(model.parameters(), model.buffers()):
        data = torch.empty_like(t, device="meta") if device == "meta" else t.detach().clone()
        is_parameter = isinstance(t, torch.nn.Parameter)
        memo[id(t)] = torch.nn.Parameter(data, requires_grad=t.requires_grad) if is_parameter else data
    return copy.deepcopy(model, memo)


def _optimizer_for(optimizer, model: torch.nn.Module, work: torch.nn.Module) -> torch.optim.Optimizer:
    """The optimizer to step on the copy: built from the string, or the same class and parameter
    groups as the user's optimizer, mapped onto the copy's parameters."""
    if isinstance(optimizer, str):
        if optimizer not in _OPTIMIZERS:
            raise InputError(f"capture: optimizer = {optimizer!r}: must be one of {', '.join(_OPTIMIZERS)} "
                             f"or a torch.optim.Optimizer")
        return _OPTIMIZERS[optimizer]([p for p in work.parameters() if p.requires_grad])
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InputError(f"capture: optimizer is a {type(optimizer).__name__}: "
                         f"must be a string or a torch.optim.Optimizer")
    mapping = {id(p): q for p, q in zip(model.parameters(), work.parameters())}
    groups = []
    for i, group in enumerate(optimizer.param_groups):
        for p in group["params"]:
            if id(p) not in mapping:
                raise InputError(f"capture: optimizer.param_groups[{i}] holds a tensor of shape {list(p.shape)} "
                                 f"that is no parameter of the model: build the optimizer on model.parameters()")
        groups.append({**group, "params": [mapping[id(p)] for p in group["params"]]})
    try:
        return type(optimizer)(groups, **optimizer.defaults)
    except TypeError as e:  # a custom optimizer whose defaults are not its constructor's arguments
        raise InputError(f"capture: cannot build a {type(optimizer).__name__} on the model's copy as "
                         f"{type(optimizer).__name__}(param_groups, **defaults): {e}") from e


# ---------------------------------------------------------------------------------------------
# Recording.


def _storage_key(t: torch.Tensor) -> int:
    return torch._C._storage_id(t)


def _storage(t: torch.Tensor):
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


@dataclass
class _TensorInfo:
    """What lowering needs of one tensor: its storage, its shape and its bytes."""

    key: int
    shape: tuple
    numel: int
    element_size: int
    offset: int
    stride: tuple
    storage_bytes: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.element_size

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass
class _Record:
    """One dispatched aten op (or a parameter, the input, an update) before lowering."""

    kind: str                      # "aten", "variable", "input", "update"
    name: str                      # aten op name ("add_"), parameter path, ...
    phase: str
    module: str = ""
    call: int = 0
    args: tuple = ()               # the op's arguments, tensors as _TensorInfo
    kwargs: dict = field(default_factory=dict)
    ins: list = field(default_factory=list)   # flat tensor inputs: (_TensorInfo, (record, output) or None)
    outs: list = field(default_factory=list)  # outputs in order, _TensorInfo or None
    fresh: list = field(default_factory=list)  # per output: allocates (True) or writes an existing storage
    node: str = ""                 # backward: the autograd node's name
    extra: dict = field(default_factory=dict)  # variable/update details


class _Recorder(TorchDispatchMode):
    """Records the aten ops of one training step with their module, call and producers.

    Owns hooks on the model copy and on the step's autograd nodes; not reentrant.
    """

    def __init__(self, model: torch.nn.Module, device: str):
        super().__init__()
        self.model = model
        self.device = device
        self.records: list[_Record] = []
        self.producer: dict[int, tuple[int, int]] = {}   # storage key -> (record, output)
        self.pinned: dict[int, Any] = {}                 # storages kept alive: their keys stay unique
        self.phase = "forward"
        self.stack: list[tuple[str, int]] = []
        self.calls: dict[int, int] = {}                  # id(module) -> calls so far
        self.paths = {id(m): p for p, m in model.named_modules()}
        self.node_tags: dict[Any, tuple[str, int]] = {}
        self.pending: list = []                          # forward outputs whose grad_fn is not read yet
        self.pending_tag = ("", 0)
        self.segment: list[_Record] = []                 # backward ops since the last node hook
        self.glue: list[tuple[int, Any]] = []            # (gradient storage, node it flows to)
        self.last_tag = ("", 0)
        self.param_owner: dict[int, tuple[str, str]] = {}  # id(param) -> (path, owner module)
        self.variables: dict[str, int] = {}                # parameter or buffer path -> its record
        for path, t in itertools.chain(model.named_parameters(), model.named_buffers()):
            owner = path.rpartition(".")[0]
            self.param_owner[id(t)] = (path, owner)
            var = _Record("variable", path, "other", owner, 0, outs=[self._info(t)], fresh=[True],
                          extra={"bytes": t.numel() * t.element_size()})
            self.variables[path] = self._add(var)

    # --- bookkeeping -----------------------------------------------------------------------------
    def _info(self, t: torch.Tensor) -> _TensorInfo:
        if t.layout != torch.strided:
            raise InputError(f"capture: a {t.layout} tensor in module '{self._where()[0]}': "
                             f"only strided (dense) tensors can be captured")
        key = _storage_key(t)
        s = self.pinned.setdefault(key, _storage(t))
        return _TensorInfo(key, tuple(t.shape), t.numel(), t.element_size(), t.storage_offset(), tuple(t.stride()),
                           s.nbytes())

    def _add(self, rec: _Record) -> int:
        index = len(self.records)
        self.records.append(rec)
        for j, info in enumerate(rec.outs):
            if info is not None:
                self.producer[info.key] = (index, j)
        return index

    def add_input_op(self, tensors: list[torch.Tensor]) -> None:
        """The example inputs and the target as one input op (the zoo's ``IteratorGetNext``)."""
        if tensors:
            self._add(_Record("input", "IteratorGetNext", "forward", "", 0, outs=[self._info(t) for t in tensors],
                              fresh=[True] * len(tensors)))

    def _where(self) -> tuple[str, int]:
        if self.stack:
            return self.stack[-1]
        return "", max(0, self.calls.get(id(self.model), 1) - 1)

    # --- module hooks ----------------------------------------------------------------------------
    def _pre_hook(self, module, args):
        self._resolve_pending()
        call = self.calls.get(id(module), 0)
        self.calls[id(module)] = call + 1
        self.stack.append((self.paths[id(module)], call))

    def _post_hook(self, module, args, output):
        self._resolve_pending()
        tag = self.stack.pop()
        # Nodes no dispatched op of ours created (a custom autograd.Function's) join this module.
        self._tag_graph([t.grad_fn for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)], tag)

    def _tag_graph(self, roots, tag):
        todo = [n for n in roots if n is not None]
        while todo:
            node = todo.pop()
            if node in self.node_tags:
                continue
            self.node_tags[node] = tag
            todo.extend(n for n, _ in node.next_functions if n is not None and not hasattr(n, "variable"))

    def _resolve_pending(self):
        # Autograd sets an op's grad_fn after the op returns from the dispatch below it, so the
        # previous op's outputs are read at the next dispatch or hook.
        for t in self.pending:
            node = t.grad_fn
            if node is not None and node not in self.node_tags:
                self.node_tags[node] = self.pending_tag
        self.pending = []

    # --- the step --------------------------------------------------------------------------------
    def run_step(self, inputs: tuple, loss: Callable, target) -> None:
        """Forward, loss and backward of the copy, recorded; the optimizer runs afterwards."""
        handles = []
        for m in self.model.modules():
            handles.append(m.register_forward_pre_hook(self._pre_hook))
            handles.append(m.register_forward_hook(self._post_hook))
        try:
            with self:
                output = self.model(*inputs)
                value = loss(output) if target is None else loss(output, target)
                self._resolve_pending()
                if not isinstance(value, torch.Tensor) or value.numel() != 1:
                    raise InputError(f"capture: loss returned {_describe(value)}: must be a scalar tensor")
                if value.grad_fn is None:
                    raise InputError("capture: the loss does not depend on any parameter that requires grad")
                self._tag_graph([value.grad_fn], self._where())
                handles.extend(self._hook_nodes(value.grad_fn))
                self.phase = "backward"
                value.backward()
                self._assign_segment(self.last_tag, "")
        finally:
            for h in handles:
                h.remove()

    def _hook_nodes(self, root) -> list:
        """Hooks every node reachable from ``root``; returns the handles, which run_step removes
        after the backward. Left in place, each hook (which holds its node) keeps the node alive,
        and a parameter's AccumulateGrad, found again by the next forward, collects one more hook
        per step: a model stepped again after the capture (``profile`` does) ran its plain steps
        of a small ResNet-18 six times slower (200 ms, not 33)."""
        handles = []
        seen = set()
        todo = [root]
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            handles.append(node.register_hook(
                lambda grad_inputs, grad_outputs, node=node: self._node_done(node, grad_inputs)))
            todo.extend(n for n, _ in node.next_functions)
        return handles

    def _tag_of(self, node) -> tuple[str, int]:
        if hasattr(node, "variable"):  # AccumulateGrad: the parameter's owner
            return self.param_owner.get(id(node.variable), ("", ""))[1], 0
        return self.node_tags.get(node, ("", 0))

    def _node_done(self, node, grad_inputs) -> None:
        tag = self._tag_of(node)
        self._assign_segment(tag, node.name())
        self.last_tag = tag
        self.glue = [(_storage_key(g), n) for g, (n, _) in zip(grad_inputs, node.next_functions)
                     if isinstance(g, torch.Tensor) and n is not None]

    def _assign_segment(self, tag, node_name: str) -> None:
        for r in self.segment:
            r.module, r.call = tag
            r.node = node_name
        self.segment = []

    def _backward_place(self, rec: _Record) -> None:
        # The engine's sums of a gradient come right after the node that produced it; they
        # belong to the node the sum flows to.
        if rec.name in ("add", "add_") and self.glue:
            keys = {info.key for info, _ in rec.ins}
            for i, (key, node) in enumerate(self.glue):
                if key in keys:
                    rec.module, rec.call = self._tag_of(node)
                    rec.node = node.name()
                    del self.glue[i]
                    return
        self.glue = []
        self.segment.append(rec)

    # --- dispatch --------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.phase == "forward":
            self._resolve_pending()
        namespace, name, _ = (str(func).split(".") + ["", ""])[:3]
        if namespace == "profiler":  # record_function marks
            return func(*args, **kwargs)
        if namespace != "aten":  # another library's op (torchvision::nms): named by its namespace
            name = f"{namespace}.{name}"
        rule = _RULES.get(name)
        out = self._run(func, name, args, kwargs)
        tensors = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if self.phase == "forward" and torch.is_grad_enabled():
            self.pending = tensors
            self.pending_tag = self._where()
        if rule is not None and rule.kind != "op":
            return out  # a view or an op without a kernel: reading it reads its base's producer
        if rule is None and not tensors and out is not None:
            return out  # an op that returns only numbers or flags
        self._record(name, args, kwargs, out)
        return out

    def _run(self, func, name, args, kwargs):
        if self.device != "meta":
            return func(*args, **kwargs)
        if name in _DATA_DEPENDENT and any(_is_meta(t) for t in tree_flatten((args, kwargs))[0]):
            where = self._where()[0] if self.phase == "forward" else "(backward)"
            raise InputError(f"aten.{name} in module '{where}': reads tensor values, which the meta device does "
                             f"not have; capture with device='cpu'")
        if name in _META_KERNELS:
            return _META_KERNELS[name](*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except NotImplementedError:
            # PyTorch 1.13 lacks some meta kernels: run the real kernel on zeros of the same
            # shapes (right for every op whose output shape does not depend on values).
            real = tree_map(lambda t: torch.zeros(t.shape, dtype=t.dtype) if _is_meta(t) else t, (args, kwargs))
            out = func(*real[0], **real[1])
            return tree_map(lambda t: torch.empty_like(t, device="meta") if isinstance(t, torch.Tensor) else t, out)

    def _record(self, name, args, kwargs, out) -> None:
        flat_in = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        infos = {id(t): self._info(t) for t in flat_in}
        ins = [(infos[id(t)], self.producer.get(infos[id(t)].key)) for t in flat_in]
        in_keys = {info.key for info, _ in ins}
        flat_out, _ = tree_flatten(out)
        outs = [self._info(t) if isinstance(t, torch.Tensor) else None for t in flat_out]
        # An output in an input's storage (in place, out=) allocates only when nothing wrote
        # that storage before (bernoulli_ on a fresh empty_like).
        fresh = [o is not None and (o.key not in in_keys or self.producer.get(o.key) is None) for o in outs]
        conv = lambda a: infos[id(a)] if isinstance(a, torch.Tensor) else a  # noqa: E731
        module, call = self._where()
        rec = _Record("aten", name, self.phase, module, call, tree_map(conv, tuple(args)), tree_map(conv, dict(kwargs)),
                      ins, outs, fresh)
        self._add(rec)
        if self.phase == "backward":
            self._backward_place(rec)

    # --- the optimizer ---------------------------------------------------------------------------
    def add_update_ops(self, opt: torch.optim.Optimizer) -> None:
        """One update op per parameter the optimizer stepped, reading the parameter and its
        gradient, with the optimizer's state for it as persistent bytes."""
        op_type = _update_type(opt)
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                path, owner = self.param_owner[id(p)]
                state = opt.state.get(p, {})
                slots = [v for k, v in state.items() if k != "step" and isinstance(v, torch.Tensor)]
                var = self.variables[path]
                grad = self._info(p.grad)
                ins = [(self.records[var].outs[0], (var, 0)), (grad, self.producer.get(grad.key))]
                extra = {"type": op_type, "elements": p.numel(), "slots": len(slots),
                         "state_bytes": sum(v.numel() * v.element_size() for v in slots)}
                self._add(_Record("update", path, "update", owner, 0, ins=ins, extra=extra))


def _is_meta(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "meta"


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return f"a {type(value).__name__}"


def _update_type(opt: torch.optim.Optimizer) -> str:
    """The zoo's update op type for the optimizer (Apply<Class> for one it does not know)."""
    if isinstance(opt, torch.optim.SGD):
        return "ApplyMomentum" if any(g.get("momentum", 0) for g in opt.param_groups) else "ApplyGradientDescent"
    for cls, name in ((torch.optim.Adam, "ApplyAdam"), (torch.optim.AdamW, "ApplyAdam"),
                      (torch.optim.RMSprop, "ApplyRMSProp"), (torch.optim.Adagrad, "ApplyAdagrad")):
        if isinstance(opt, cls):
            return name
    return "Apply" + type(opt).__name__


def _conv_backward_meta(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                        output_padding, groups, output_mask):
    # aten::convolution_backward has no meta kernel in PyTorch 1.13: the gradients have the
    # shapes of the input, the weight and the bias.
    bias = list(bias_sizes or [weight.shape[0]])
    return (torch.empty_like(input) if output_mask[0] else None,
            torch.empty_like(weight) if output_mask[1] else None,
            torch.empty(bias, dtype=grad_output.dtype, device="meta") if output_mask[2] else None)


_META_KERNELS = {"convolution_backward": _conv_backward_meta}

# Ops whose output shape or the model's control flow depends on tensor values.
_DATA_DEPENDENT = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "_unique", "_unique2", "unique_dim",
                             "unique_consecutive", "equal", "is_nonzero", "bincount", "repeat_interleave", "argwhere"})


# ---------------------------------------------------------------------------------------------
# The rules: aten op -> placelab op type(s) and kernel signature. Names and signatures are those
# of the model zoo's PyTorch form (models/src/builder.cpp) and of the Kineto trace importer
# (profiler/src/trace_import.cpp, kTorchToGraph and torch_signature), so calibrations apply.


class _Part(NamedTuple):
    kernel: dict
    type: str | None = None     # None: the rule's type for the phase
    flops: float | None = None  # set where the kernel class counts wrong (grouped, dilated)
    ins: tuple | None = None    # flat tensor inputs it reads (None: all)
    outs: tuple | None = None   # outputs it writes (None: all)


@dataclass(frozen=True)
class _Rule:
    kind: str                   # "op", "alias" (a view: no op), "none" (no kernel: empty, .item())
    forward: str = ""
    backward: str = ""
    kernel: Callable | None = None


class _Call(NamedTuple):
    """One recorded op as a rule sees it."""

    name: str
    args: tuple
    kwargs: dict
    ins: list    # _TensorInfo of the flat tensor inputs
    outs: list   # _TensorInfo or None per output
    module: str
    phase: str

    def arg(self, index: int, key: str, default=None):
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(key, default)

    def error(self, what: str) -> InputError:
        qualified = self.name if "." in self.name else "aten." + self.name
        return InputError(f"{qualified} in module '{self.module}' ({self.phase}): {what}")


def _ew(elements, inputs):
    return {"class": "elementwise", "elements": int(elements), "inputs": int(inputs)}


def _red(elements, out):
    return {"class": "reduction", "elements": int(elements), "out": int(out)}


def _gemm(m, n, k, batch=1):
    return {"class": "gemm", "m": int(m), "n": int(n), "k": int(k), "batch": int(batch)}


def _out(c: _Call, i: int = 0) -> _TensorInfo:
    return c.outs[i]


def _k_elementwise(c: _Call):
    sizes = [t.numel for t in c.ins] + [t.numel for t in c.outs if t is not None]
    inputs = sum(1 for t in c.ins if t.ndim > 0)
    return [_Part(_ew(max(sizes, default=1), max(1, 1 if c.name == "copy_" else inputs)))]


def _k_reduction(c: _Call):
    return [_Part(_red(c.ins[0].numel, max(1, _out(c).numel)))]


def _k_copy(c: _Call):
    return [_Part({"class": "copy", "bytes": sum(t.nbytes for t in c.outs if t is not None)})]


def _k_mm(c: _Call):
    a, b = c.ins[-2], c.ins[-1]  # mm(a, b); addmm(bias, a, b)
    if a.ndim != 2 or b.ndim != 2:
        raise c.error(f"operands of rank {a.ndim} and {b.ndim}: expected matrices")
    return [_Part(_gemm(a.shape[0], b.shape[1], a.shape[1]))]


def _k_bmm(c: _Call):
    a, b = c.ins[-2], c.ins[-1]  # bmm(a, b); baddbmm(self, a, b)
    return [_Part(_gemm(a.shape[1], b.shape[2], a.shape[2], a.shape[0]))]


def _k_mv(c: _Call):
    a = c.ins[-2]  # mv(a, v); addmv(self, a, v); dot(a, b)
    return [_Part(_gemm(a.shape[0], 1, a.shape[1]) if a.ndim == 2 else _gemm(1, 1, a.numel))]


def _pair(v) -> tuple[int, ...]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(v) == 1:
        v = v * 2
    return tuple(int(x) for x in v)


def _conv_signature(c: _Call, x: _TensorInfo, w: _TensorInfo, stride, padding, dilation, transposed, groups):
    """conv2d fields and explicit FLOPs (grouped, dilated) of a 1-D or 2-D convolution."""
    if transposed:
        raise c.error("a transposed convolution (ConvTranspose) cannot be captured: no kernel class describes it")
    if x.ndim == 3:  # 1-D: a 2-D convolution of height 1
        n, cin, h, wd, r, s = x.shape[0], x.shape[1], 1, x.shape[2], 1, w.shape[2]
        stride, padding, dilation = (1, *_pair(stride)[:1]), (0, *_pair(padding)[:1]), (1, *_pair(dilation)[:1])
    elif x.ndim == 4:
        n, cin, h, wd, r, s = x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[2], w.shape[3]
        stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    else:
        raise c.error(f"a {x.ndim - 2}-D convolution cannot be captured: the conv2d kernel class is 1-D or 2-D only")
    if stride[0] != stride[1] and h > 1:
        raise c.error(f"stride {list(stride)} is asymmetric: the conv2d kernel class has one stride")
    sh = stride[1]
    # One padding for both axes; an asymmetric one is the padded input with pad 0 (same output
    # size and work), as the zoo's builder does for Inception's 1x7 convolutions.
    if padding[0] == padding[1]:
        ph, pad = h, padding[0]
        pw = wd
    else:
        ph, pw, pad = h + 2 * padding[0], wd + 2 * padding[1], 0
    # A dilated filter has the extent d*(r-1)+1, which gives the output size; its work is r*s.
    re, se = dilation[0] * (r - 1) + 1, dilation[1] * (s - 1) + 1
    k = w.shape[0]
    sig = {"n": n, "c": cin, "h": ph, "w": pw, "k": k, "r": re, "s": se, "stride": sh, "pad": pad}
    ho, wo = (ph + 2 * pad - re) // sh + 1, (pw + 2 * pad - se) // sh + 1
    if ho < 1 or wo < 1:  # PyTorch 1.13's meta kernel does not check this; the CPU one does
        raise c.error(f"the padded input {ph + 2 * pad}x{pw + 2 * pad} is smaller than the {re}x{se} filter")
    flops = None
    if groups != 1 or dilation != (1, 1):
        flops = float(2 * n * k * (cin // groups) * r * s * ho * wo)
    return {key: int(v) for key, v in sig.items()}, flops


def _k_convolution(c: _Call):
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    sig, flops = _conv_signature(c, c.arg(0, "input"), c.arg(1, "weight"), c.arg(3, "stride"), c.arg(4, "padding"),
                                 c.arg(5, "dilation"), c.arg(6, "transposed"), c.arg(8, "groups"))
    return [_Part({"class": "conv2d", **sig}, flops=flops)]


def _k_convolution_backward(c: _Call):
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask): up to three ops, as the zoo emits them.
    go = c.arg(0, "grad_output")
    sig, flops = _conv_signature(c, c.arg(1, "input"), c.arg(2, "weight"), c.arg(4, "stride"), c.arg(5, "padding"),
                                 c.arg(6, "dilation"), c.arg(7, "transposed"), c.arg(9, "groups"))
    mask = list(c.arg(10, "output_mask"))
    parts = []
    if mask[0]:
        parts.append(_Part({"class": "conv2d_backprop_input", **sig}, "Conv2DBackpropInput", flops, (0, 2), (0,)))
    if mask[1]:
        parts.append(_Part({"class": "conv2d_backprop_filter", **sig}, "Conv2DBackpropFilter", flops, (0, 1), (1,)))
    if mask[2]:
        parts.append(_Part(_red(go.numel, go.shape[1]), "Sum", None, (0,), (2,)))
    return parts


def _k_pool(c: _Call):
    # max_pool2d_with_indices / avg_pool2d(self, kernel_size, ...): out x window reads.
    kh, kw = _pair(c.arg(1, "kernel_size"))
    out = _out(c).numel
    return [_Part(_red(out * kh * kw, out))]


def _k_pool_grad(inputs: int):
    # *_pool2d_backward(grad_output, self, ...): one pass over the input's elements.
    return lambda c: [_Part(_ew(c.ins[1].numel, inputs))]


def _k_softmax(c: _Call):
    x = c.ins[0]
    dim = c.arg(1, "dim") % max(1, x.ndim) if x.ndim else 0
    cols = x.shape[dim] if x.ndim else 1
    return [_Part({"class": "softmax", "rows": x.numel // max(1, cols), "cols": cols})]


def _k_norm(inputs: int):
    # native_batch_norm / native_layer_norm (inputs 2), their backwards (inputs 3): the zoo's
    # FusedBatchNorm / LayerNorm signatures, elementwise over the normalised tensor.
    return lambda c: [_Part(_ew(c.ins[0].numel if "backward" not in c.name else c.ins[1].numel, inputs))]


def _k_embedding(c: _Call):
    table, ids = c.ins[0], c.ins[1]
    return [_Part({"class": "embedding", "rows": table.shape[0], "dim": table.shape[-1], "lookups": ids.numel})]


def _k_embedding_backward(c: _Call):
    # embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    go, ids = c.ins[0], c.ins[1]
    rows = int(c.arg(2, "num_weights"))
    return [_Part({"class": "embedding", "rows": rows, "dim": go.shape[-1], "lookups": ids.numel})]


def _k_nll_loss(c: _Call):
    x = c.ins[0]
    return [_Part(_red(x.shape[0] if x.ndim >= 2 else 1, max(1, _out(c).numel)))]


def _k_nll_loss_grad(c: _Call):
    return [_Part(_ew(c.ins[1].numel, 1))]  # nll_loss_backward(grad_output, self, ...)


_ALIAS = _Rule("alias")
_NONE = _Rule("none")


def _op(forward: str, kernel: Callable = _k_elementwise, backward: str | None = None) -> _Rule:
    return _Rule("op", forward, backward or forward, kernel)


_RULES: dict[str, _Rule] = {
    # Views and aliases: no op; a reader of one reads its base's producer.
    **{name: _ALIAS for name in (
        "view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute", "expand", "squeeze",
        "unsqueeze", "select", "slice", "narrow", "split", "split_with_sizes", "unsafe_split",
        "unsafe_split_with_sizes", "unbind", "chunk", "unsafe_chunk", "as_strided", "detach", "alias", "lift_fresh",
        "diagonal", "unfold", "view_as_real", "view_as_complex", "_neg_view", "_conj", "movedim", "swapaxes",
        "lift")},
    # No kernel: allocation, metadata, a value read.
    **{name: _NONE for name in (
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_local_scalar_dense",
        "resize_", "is_same_size", "sym_size", "sym_stride", "sym_numel", "record_stream", "equal", "is_nonzero")},
    # Convolutions, matrix products.
    "convolution": _op("Conv2D", _k_convolution),
    "convolution_backward": _op("Conv2DBackpropInput", _k_convolution_backward),
    "mm": _op("MatMul", _k_mm),
    "addmm": _op("MatMul", _k_mm),
    "bmm": _op("BatchMatMul", _k_bmm),
    "baddbmm": _op("BatchMatMul", _k_bmm),
    "mv": _op("MatMul", _k_mv),
    "addmv": _op("MatMul", _k_mv),
    "dot": _op("MatMul", _k_mv),
    # Normalisation, pooling, softmax, embeddings, losses.
    "native_batch_norm": _op("FusedBatchNorm", _k_norm(2)),
    "_native_batch_norm_legit": _op("FusedBatchNorm", _k_norm(2)),  # PyTorch 2's name for it
    "native_batch_norm_backward": _op("FusedBatchNormGrad", _k_norm(3)),
    "native_layer_norm": _op("LayerNorm", _k_norm(2)),
    "native_layer_norm_backward": _op("LayerNormGrad", _k_norm(3)),
    "native_group_norm": _op("GroupNorm", _k_norm(2)),
    "native_group_norm_backward": _op("GroupNormGrad", _k_norm(3)),
    "max_pool2d_with_indices": _op("MaxPool", _k_pool),
    "max_pool2d": _op("MaxPool", _k_pool),
    "max_pool2d_with_indices_backward": _op("MaxPoolGrad", _k_pool_grad(3)),
    "avg_pool2d": _op("AvgPool", _k_pool),
    "avg_pool2d_backward": _op("AvgPoolGrad", _k_pool_grad(1)),
    "_adaptive_avg_pool2d": _op("AvgPool", _k_reduction),
    "_adaptive_avg_pool2d_backward": _op("AvgPoolGrad", _k_pool_grad(1)),
    "_softmax": _op("Softmax", _k_softmax),
    "_log_softmax": _op("LogSoftmax", _k_softmax),
    "_softmax_backward_data": _op("SoftmaxGrad"),
    "_log_softmax_backward_data": _op("LogSoftmaxGrad"),
    "embedding": _op("GatherV2", _k_embedding),
    "embedding_dense_backward": _op("EmbeddingGrad", _k_embedding_backward),
    "nll_loss_forward": _op("NllLoss", _k_nll_loss),
    "nll_loss_backward": _op("NllLossGrad", _k_nll_loss_grad),
    "nll_loss2d_forward": _op("NllLoss", _k_nll_loss),
    "nll_loss2d_backward": _op("NllLossGrad", _k_nll_loss_grad),
    "mse_loss": _op("MseLoss", _k_reduction),
    "mse_loss_backward": _op("MseLossGrad"),
    "native_dropout": _op("Dropout"),
    "native_dropout_backward": _op("DropoutGrad"),
    # Reductions.
    "sum": _op("Sum", _k_reduction),
    "mean": _op("Mean", _k_reduction),
    "amax": _op("Max", _k_reduction),
    "amin": _op("Min", _k_reduction),
    "max": _op("Max", _k_reduction),
    "min": _op("Min", _k_reduction),
    "argmax": _op("ArgMax", _k_reduction),
    "argmin": _op("ArgMin", _k_reduction),
    "prod": _op("Prod", _k_reduction),
    "var": _op("Var", _k_reduction),
    "var_mean": _op("VarMean", _k_reduction),
    "std": _op("Std", _k_reduction),
    "norm": _op("Norm", _k_reduction),
    "linalg_vector_norm": _op("Norm", _k_reduction),
    "logsumexp": _op("LogSumExp", _k_reduction),
    "all": _op("All", _k_reduction),
    "any": _op("Any", _k_reduction),
    # Copies.
    "cat": _op("ConcatV2", _k_copy),
    "stack": _op("Pack", _k_copy),
    "constant_pad_nd": _op("Pad", _k_copy),
    # Elementwise: one output element from `inputs` input elements.
    **{name: _op(type_) for name, type_ in (
        ("relu", "Relu"), ("relu_", "Relu"), ("threshold_backward", "ReluGrad"), ("sigmoid", "Sigmoid"),
        ("sigmoid_", "Sigmoid"), ("sigmoid_backward", "SigmoidGrad"), ("tanh", "Tanh"), ("tanh_", "Tanh"),
        ("tanh_backward", "TanhGrad"), ("gelu", "Gelu"), ("gelu_backward", "GeluGrad"), ("silu", "Silu"),
        ("silu_", "Silu"), ("silu_backward", "SiluGrad"), ("hardtanh", "Relu6"), ("hardtanh_", "Relu6"),
        ("hardtanh_backward", "Relu6Grad"), ("hardswish", "HardSwish"), ("hardswish_", "HardSwish"),
        ("hardswish_backward", "HardSwishGrad"), ("hardsigmoid", "HardSigmoid"), ("hardsigmoid_", "HardSigmoid"),
        ("hardsigmoid_backward", "HardSigmoidGrad"), ("leaky_relu", "LeakyRelu"), ("leaky_relu_", "LeakyRelu"),
        ("leaky_relu_backward", "LeakyReluGrad"), ("elu", "Elu"), ("elu_", "Elu"), ("elu_backward", "EluGrad"),
        ("softplus", "Softplus"), ("softplus_backward", "SoftplusGrad"),
        ("sub", "Sub"), ("sub_", "Sub"), ("rsub", "Sub"), ("mul", "Mul"), ("mul_", "Mul"), ("div", "Div"),
        ("div_", "Div"), ("neg", "Neg"), ("neg_", "Neg"), ("exp", "Exp"), ("exp_", "Exp"), ("log", "Log"),
        ("log_", "Log"), ("log1p", "Log1p"), ("sqrt", "Sqrt"), ("sqrt_", "Sqrt"), ("rsqrt", "Rsqrt"),
        ("rsqrt_", "Rsqrt"), ("pow", "Pow"), ("pow_", "Pow"), ("reciprocal", "Reciprocal"), ("abs", "Abs"),
        ("sign", "Sign"), ("sgn", "Sign"), ("sin", "Sin"), ("cos", "Cos"), ("erf", "Erf"), ("floor", "Floor"),
        ("ceil", "Ceil"), ("round", "Round"), ("fmod", "FloorMod"), ("remainder", "FloorMod"),
        ("clamp", "ClipByValue"), ("clamp_", "ClipByValue"), ("clamp_min", "Maximum"), ("clamp_min_", "Maximum"),
        ("clamp_max", "Minimum"), ("clamp_max_", "Minimum"), ("maximum", "Maximum"), ("minimum", "Minimum"),
        ("where", "Select"), ("masked_fill", "MaskedFill"), ("masked_fill_", "MaskedFill"), ("lerp", "Lerp"),
        ("lerp_", "Lerp"), ("addcmul", "AddCMul"), ("addcmul_", "AddCMul"), ("addcdiv", "AddCDiv"),
        ("addcdiv_", "AddCDiv"), ("eq", "Equal"), ("ne", "NotEqual"), ("lt", "Less"), ("le", "LessEqual"),
        ("gt", "Greater"), ("ge", "GreaterEqual"), ("logical_not", "LogicalNot"), ("logical_and", "LogicalAnd"),
        ("logical_or", "LogicalOr"), ("bitwise_not", "BitwiseNot"), ("bitwise_and", "BitwiseAnd"),
        ("bitwise_or", "BitwiseOr"), ("tril", "MatrixBandPart"), ("triu", "MatrixBandPart"),
        ("clone", "Identity"), ("copy_", "Copy"), ("_to_copy", "Cast"), ("fill_", "Fill"), ("zero_", "ZerosLike"),
        ("zeros", "Zeros"), ("zeros_like", "ZerosLike"), ("ones", "Ones"), ("ones_like", "OnesLike"),
        ("full", "Fill"), ("full_like", "Fill"), ("scalar_tensor", "Fill"), ("arange", "Range"),
        ("bernoulli", "Bernoulli"), ("bernoulli_", "Bernoulli"), ("uniform_", "RandomUniform"),
        ("normal_", "RandomStandardNormal"), ("rand", "RandomUniform"), ("rand_like", "RandomUniform"),
        ("randn", "RandomStandardNormal"), ("randn_like", "RandomStandardNormal"), ("randint", "RandomUniformInt"),
        ("select_backward", "SliceGrad"), ("slice_backward", "SliceGrad"), ("index_select", "GatherV2"),
        ("index", "GatherNd"), ("gather", "GatherElements"), ("index_put_", "ScatterNd"),
        ("_index_put_impl_", "ScatterNd"), ("index_add_", "ScatterAdd"), ("scatter", "Scatter"),
        ("scatter_add", "ScatterAdd"), ("repeat", "Tile"), ("flip", "ReverseV2"), ("roll", "Roll"),
        ("upsample_nearest2d", "ResizeNearestNeighbor"), ("upsample_nearest2d_backward", "ResizeNearestNeighborGrad"),
        ("upsample_bilinear2d", "ResizeBilinear"), ("upsample_bilinear2d_backward", "ResizeBilinearGrad"))},
    # Autograd sums a gradient read twice with add (the importer's AddN).
    "add": _op("Add", backward="AddN"),
    "add_": _op("Add", backward="AddN"),
}

# A backward op's type from its autograd node where the aten op alone does not say it (the
# importer's rule: adaptive_avg_pool2d to 1x1 runs aten::mean, whose backward is MeanBackward1's).
_NODE_TYPES = {"MeanBackward1": "AvgPoolGrad"}


def _op_type(rule: _Rule, rec: _Record, part: _Part, c: _Call) -> str:
    if part.type is not None:
        return part.type
    if rec.phase == "backward":
        by_node = _NODE_TYPES.get(rec.node)
        if by_node and c.outs and c.outs[0] is not None and c.outs[0].ndim == 4:
            return by_node
        return rule.backward
    if rec.name == "mean" and c.ins[0].ndim == 4 and _is_spatial_mean(c):
        return "AvgPool"  # AdaptiveAvgPool2d((1, 1)): mean over H and W, as the importer names it
    return rule.forward


def _is_spatial_mean(c: _Call) -> bool:
    dims = c.arg(1, "dim")
    return isinstance(dims, (list, tuple)) and sorted(d % 4 for d in dims) == [2, 3]


# ---------------------------------------------------------------------------------------------
# Lowering: records -> graph ops and edges.


class _Namer:
    """Unique op names: ``<module>/<Type>``, ``gradients/<module>/<Type>`` in the backward, a
    suffix ``_1``, ``_2`` ... on repeats."""

    def __init__(self):
        self.used: set[str] = set()
        self.next: dict[str, int] = {}  # base -> the next suffix to try (an LSTM repeats its gates)

    def __call__(self, base: str) -> str:
        name, i = base, self.next.get(base, 0)
        if i:
            name = f"{base}_{i}"
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        self.next[base] = i + 1
        return name


def _lower(rec: _Recorder, origins: list[int] | None = None) -> tuple[list[dict], list[dict]]:
    """The graph's ops and edges from the records, in program order; ``origins``, when given, gets
    the index of the record each op came from (a convolution's backward is up to three ops)."""
    ops: list[dict] = []
    edges: list[dict] = []
    made: dict[tuple[int, int], int] = {}  # (record, output) -> op index
    name = _Namer()
    for index, r in enumerate(rec.records):
        for op, part in _ops_of(r, name):
            op_index = len(ops)
            ops.append(op)
            if origins is not None:
                origins.append(index)
            for j in (part.outs if part is not None and part.outs is not None else range(len(r.outs))):
                made[(index, j)] = op_index
            ins = r.ins if part is None or part.ins is None else [r.ins[i] for i in part.ins]
            edges.extend(_edges_into(op_index, ins, made, ops))
    return ops, edges


def _ops_of(r: _Record, name: _Namer):
    if r.kind == "variable":
        op_name = name(r.name)
        yield _graph_op(op_name, "VariableV2", "other", {"class": "noop"}, 0, r.extra["bytes"], r.module, 0,
                        colocation=op_name), None
    elif r.kind == "input":
        total = sum(t.nbytes for t in r.outs)
        yield _graph_op(name("IteratorGetNext"), "IteratorGetNext", "forward", {"class": "copy", "bytes": total}, total,
                        0, "", 0, cpu_only=True), None
    elif r.kind == "update":
        e = r.extra
        yield _graph_op(name(f"{r.name}/{e['type']}"), e["type"], "update", _ew(e["elements"], 2 + e["slots"]), 0,
                        e["state_bytes"], r.module, r.call, colocation=r.name), None
    else:
        yield from _aten_ops(r, name)


def _aten_ops(r: _Record, name: _Namer):
    rule = _RULES.get(r.name)
    c = _Call(r.name, r.args, r.kwargs, [info for info, _ in r.ins], r.outs, r.module, r.phase)
    if rule is None or rule.kind != "op":
        raise c.error("no capture rule for this op: placelab.torch knows convolutions, matrix products, "
                      "normalisation, pooling, softmax, embeddings, losses, reductions and elementwise ops "
                      "(the _RULES table)")
    prefix = ("gradients/" if r.phase == "backward" else "") + (f"{r.module}/" if r.module else "")
    for part in rule.kernel(c):
        outs = part.outs if part.outs is not None else range(len(r.outs))
        out_bytes = sum(r.outs[j].nbytes for j in outs if r.outs[j] is not None and r.fresh[j])
        type_ = _op_type(rule, r, part, c)
        extra = {"flops": part.flops} if part.flops is not None else {}
        op = _graph_op(name(prefix + type_), type_, r.phase, part.kernel, out_bytes, 0, r.module, r.call, **extra)
        yield op, part


def _graph_op(name, type_, phase, kernel, output_bytes, persistent_bytes, module, call, *, flops=None, cpu_only=False,
              colocation="") -> dict:
    op = {"name": name, "type": type_, "phase": phase, "kernel": kernel}
    if flops is not None:
        op["flops"] = flops
    op["output_bytes"] = int(output_bytes)
    op["persistent_bytes"] = int(persistent_bytes)
    if cpu_only:
        op["cpu_only"] = True
    op["layer"] = -1
    if colocation:
        op["colocation"] = colocation
    op["module"] = module
    op["call"] = int(call)
    return op


def _edges_into(dst: int, ins, made, ops) -> list[dict]:
    # One edge per (producer op, storage); its bytes are what the op reads of the storage:
    # the distinct views it reads, at most the whole storage (an expanded view reads less).
    views: dict[tuple[int, int], dict] = {}
    for info, source in ins:
        if source is None or source not in made:
            continue
        src = made[source]
        entry = views.setdefault((src, info.key), {"storage": info.storage_bytes, "views": {}})
        entry["views"][(info.offset, info.shape, info.stride)] = info.nbytes
    return [{"src": ops[src]["name"], "dst": ops[dst]["name"],
             "bytes": int(min(v["storage"], sum(v["views"].values())))} for (src, _), v in views.items()]


# ---------------------------------------------------------------------------------------------
# Command line: python3 -m placelab.torch capture | measure | profile --model SPEC ...
#
# Every subcommand takes the same model spec: ``torchvision:NAME`` (a classifier on random images,
# sized by --batch, --image, --classes) or a factory, ``package.module:function`` or
# ``path/to/file.py:function``, called with no arguments, returning the step's pieces as a dict.


@dataclass
class _ModelSpec:
    """One training step's pieces, as a --model spec gives them."""

    model: torch.nn.Module
    example_inputs: tuple
    loss: Callable
    target: Any
    optimizer: str      # a key of _OPTIMIZERS
    name: str | None    # the graph's name (None: the model's class name, as capture() names it)


_FACTORY_KEYS = ("model", "example_inputs", "loss", "target")
_SPEC_FORMS = "torchvision:NAME, package.module:function or path/to/file.py:function"


def _torchvision_model(spec: str, classes: int) -> torch.nn.Module:
    """A torchvision classifier from ``torchvision:NAME`` (random weights; Inception and GoogLeNet
    with their auxiliary heads, weights not initialised: the capture needs no values)."""
    source, _, model_name = spec.partition(":")
    if source != "torchvision" or not model_name:
        raise InputError(f"--model {spec}: must be torchvision:NAME (e.g. torchvision:resnet50)")
    import torchvision

    builder = getattr(torchvision.models, model_name, None)
    if builder is None or not callable(builder) or model_name.startswith("_"):
        raise InputError(f"--model {spec}: torchvision.models has no model {model_name!r}")
    kwargs = {"init_weights": False} if model_name in ("inception_v3", "googlenet") else {}
    return builder(num_classes=classes, **kwargs)


def _classifier_loss(output, target):
    """Cross entropy of a torchvision classifier's output, with the auxiliary heads' losses
    weighted as torchvision's reference training weights them (0.4 Inception, 0.3 GoogLeNet)."""
    F = torch.nn.functional
    if hasattr(output, "aux_logits") and output.aux_logits is not None:
        return F.cross_entropy(output.logits, target) + 0.4 * F.cross_entropy(output.aux_logits, target)
    if hasattr(output, "aux_logits1") and output.aux_logits1 is not None:
        aux = F.cross_entropy(output.aux_logits1, target) + F.cross_entropy(output.aux_logits2, target)
        return F.cross_entropy(output.logits, target) + 0.3 * aux
    return F.cross_entropy(getattr(output, "logits", output), target)


def _load_model_spec(spec: str, *, batch: int | None = None, image: int | None = None,
                     classes: int | None = None, optimizer: str | None = None) -> _ModelSpec:
    """The model, inputs, loss, target and optimizer that ``--model spec`` names.

    ``torchvision:NAME``: the classifier with random inputs of ``batch`` (default 32) images of
    ``image`` pixels a side (default 299 for inception_v3, else 224), ``classes`` (default 1000),
    cross entropy (``_classifier_loss``). ``module:function``, ``file.py:function``: see
    ``_factory_spec``. ``optimizer`` (an _OPTIMIZERS name) overrides the factory's; default sgd.
    Raises InputError naming the spec and what was expected.
    """
    if optimizer is not None and optimizer not in _OPTIMIZERS:
        raise InputError(f"--optimizer {optimizer}: must be one of {', '.join(_OPTIMIZERS)}")
    if spec.startswith("torchvision:"):
        batch, classes = (32 if batch is None else batch), (1000 if classes is None else classes)
        for flag, value in (("--batch", batch), ("--classes", classes), ("--image", image)):
            if value is not None and value < 1:
                raise InputError(f"{flag} = {value}: must be >= 1")
        model = _torchvision_model(spec, classes)
        model.train()
        side = image or (299 if spec.endswith("inception_v3") else 224)
        inputs = (torch.randn(batch, 3, side, side),)
        target = torch.randint(0, classes, (batch,))
        name = f"{spec.partition(':')[2]}:batch={batch},image={side}"
        return _ModelSpec(model, inputs, _classifier_loss, target, optimizer or "sgd", name)
    for flag, value in (("--batch", batch), ("--image", image), ("--classes", classes)):
        if value is not None:
            raise InputError(f"{flag} = {value}: only for --model torchvision:NAME; the factory of "
                             f"--model {spec} makes its own inputs")
    made = _factory_spec(spec)
    if optimizer is not None:
        made.optimizer = optimizer
    return made


def _factory_spec(spec: str) -> _ModelSpec:
    """``package.module:function`` (imported as ``import package.module`` would: the current
    folder is on ``sys.path`` under ``python3 -m``) or ``path/to/file.py:function`` (run as a module
    of its own, its folder put first on ``sys.path`` as ``python3 path/to/file.py`` would, so it can
    import its neighbours); ``function`` may be dotted (``Models.tiny``). The function is called with
    no arguments and returns {"model": nn.Module, "example_inputs": tuple (or one tensor),
    "loss": callable(output, target) (callable(output) when target is None), "target": ...,
    "optimizer": an _OPTIMIZERS name (optional, default "sgd")}."""
    source, colon, attr = spec.rpartition(":")
    if not colon or not source or not attr:
        raise InputError(f"--model {spec}: must be {_SPEC_FORMS}")
    module = _import_source(spec, source)
    factory: Any = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise InputError(f"--model {spec}: {source} has no attribute {attr!r}")
    if not callable(factory):
        raise InputError(f"--model {spec}: {attr} is a {type(factory).__name__}: must be a function that "
                         f"returns a dict with keys {', '.join(_FACTORY_KEYS)} (and optionally optimizer)")
    try:
        made = factory()
    except Exception as e:  # noqa: BLE001 - the user's code: its failure is bad input, the cause kept
        raise InputError(f"--model {spec}: {attr}() failed: {type(e).__name__}: {e}") from e
    return _check_factory_result(spec, made)


def _import_source(spec: str, source: str):
    if not source.endswith(".py"):
        try:
            return importlib.import_module(source)
        except ImportError as e:
            raise InputError(f"--model {spec}: cannot import {source}: {e}") from e
        except Exception as e:  # noqa: BLE001 - an error in the user's module
            raise InputError(f"--model {spec}: importing {source} failed: {type(e).__name__}: {e}") from e
    path = os.path.abspath(source)
    if not os.path.isfile(path):
        raise InputError(f"--model {spec}: {source}: no such file")
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    stem = os.path.splitext(os.path.basename(path))[0]
    name = "_placelab_model_" + "".join(c if c.isalnum() else "_" for c in stem)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up there
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - an error in the user's file
        del sys.modules[name]
        raise InputError(f"--model {spec}: running {source} failed: {type(e).__name__}: {e}") from e
    return module


def _check_factory_result(spec: str, made) -> _ModelSpec:
    expected = f"a dict with keys {', '.join(_FACTORY_KEYS)} (and optionally optimizer)"
    if not isinstance(made, dict):
        raise InputError(f"--model {spec}: the factory returned a {type(made).__name__}: must return {expected}")
    missing = [k for k in _FACTORY_KEYS if k not in made]
    if missing:
        raise InputError(f"--model {spec}: the factory's dict lacks {', '.join(missing)}: must be {expected}")
    unknown = sorted(set(made) - set(_FACTORY_KEYS) - {"optimizer"}, key=str)
    if unknown:
        raise InputError(f"--model {spec}: the factory's dict has unknown key {unknown[0]!r}: must be {expected}")
    model, inputs, loss = made["model"], made["example_inputs"], made["loss"]
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"--model {spec}: model is a {type(model).__name__}: must be a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)):
        raise InputError(f"--model {spec}: example_inputs is a {type(inputs).__name__}: must be a tuple of the "
                         f"model's positional arguments")
    if not callable(loss):
        raise InputError(f"--model {spec}: loss is a {type(loss).__name__}: must be callable as loss(output, target)")
    optimizer = made.get("optimizer", "sgd")
    if optimizer not in _OPTIMIZERS:
        raise InputError(f"--model {spec}: optimizer = {optimizer!r}: must be one of {', '.join(_OPTIMIZERS)}")
    model.train()
    return _ModelSpec(model, tuple(inputs), loss, made["target"], optimizer, None)


def _add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="SPEC",
                        help=f"{_SPEC_FORMS} (a factory returning a dict: docs/python.md, 'Model specs')")
    parser.add_argument("--batch", type=int, help="torchvision only: images per step (default 32)")
    parser.add_argument("--image", type=int,
                        help="torchvision only: image side in pixels (default 299 for inception_v3, else 224)")
    parser.add_argument("--classes", type=int, help="torchvision only: output classes (default 1000)")
    parser.add_argument("--optimizer", choices=list(_OPTIMIZERS),
                        help="the zoo's names: sgd (plain), momentum (0.9), rmsprop, adam, adamw; default: the "
                             "factory's, else sgd")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m placelab.torch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="capture a model's training step as a placelab graph")
    _add_model_flags(cap)
    cap.add_argument("--device", default="meta", choices=["meta", "cpu"], help="meta: no compute (default)")
    cap.add_argument("-o", "--output", required=True, help="the graph file to write")
    mea = sub.add_parser("measure", help="time real training steps of the model placed by a module map")
    _add_model_flags(mea)
    where = mea.add_mutually_exclusive_group(required=True)
    where.add_argument("--placement", metavar="MAP.json",
                       help="a module map {module path: device} (placelab export-placement --format torch)")
    where.add_argument("--all-on", metavar="DEVICE", help="every module on one device: cpu, cuda:0, ...")
    mea.add_argument("--device-map", action="append", default=[], metavar="FROM=TO",
                     help="run the map's device FROM on TO (cuda:1=cpu); repeat for more")
    mea.add_argument("--missing-devices", metavar="DEVICE",
                     help="run every cuda:N of the map that torch lacks here (and no --device-map names) on "
                          "DEVICE, e.g. cpu")
    mea.add_argument("--steps", type=int, default=6, help="training steps, the first a warm-up (default 6)")
    mea.add_argument("--check", action="store_true",
                     help="first compare one step's loss and gradients with the unplaced model's")
    mea.add_argument("-o", "--output", required=True, help="the result JSON to write")
    pro = sub.add_parser("profile", help="time every captured op on this CPU; write the graph with measured_s "
                                         "and a one-CPU machine with the measured dispatch_s")
    _add_model_flags(pro)
    pro.add_argument("--steps", type=int, default=5, help="training steps, the first a warm-up (default 5)")
    pro.add_argument("-o", "--output", required=True, help="the graph file to write (measured_s on every op)")
    pro.add_argument("--machine-out", required=True, metavar="MACHINE.yaml", help="the machine file to write")
    return parser


def _capture_command(args, spec: _ModelSpec) -> str:
    g = capture(spec.model, spec.example_inputs, spec.loss, spec.target, spec.optimizer, name=spec.name,
                device=args.device)
    _write_output(args.output, g.to_json())
    return (f"{args.output}: {g.num_ops} ops, {g.num_edges} edges, {g.parameters} parameters, "
            f"captured in {g.capture_s:.2f} s")


def _write_output(path: str, text: str) -> None:
    try:
        _write_text_atomically(path, text)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e}") from e


def _check_output_folders(args) -> None:
    """The output files' folders exist: checked before a step runs, so that a mistyped path does
    not cost a long profile, nor leave one of two files written."""
    for path in (getattr(args, "output", None), getattr(args, "machine_out", None)):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise InputError(f"{path}: cannot write: no folder {os.path.dirname(os.path.abspath(path))}")


def main(argv: list[str] | None = None) -> int:
    """``python3 -m placelab.torch capture|measure|profile --model SPEC ...``; returns the exit
    status: 0, or 2 on bad input (the message on stderr as ``placelab.torch: error: ...``)."""
    args = _parser().parse_args(argv)
    try:
        _check_output_folders(args)
        spec = _load_model_spec(args.model, batch=args.batch, image=args.image, classes=args.classes,
                                optimizer=args.optimizer)
        if args.command == "capture":
            line = _capture_command(args, spec)
        else:
            from . import _torch_measure  # noqa: PLC0415 - only measure and profile need it

            line = (_torch_measure.measure_command if args.command == "measure" else _torch_measure.profile_command)(
                args, spec)
    except InputError as e:
        print(f"placelab.torch: error: {e}", file=sys.stderr)
        return 2
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
