"""Where a planned run trains: its memory on one device, and the devices, micro-batch and
gradient-accumulation steps that hold it while keeping the planned global batch exactly.

Why here and not at run time: a run that cannot fit its device fails in its first step, a
queued job lost per run on a cluster. The plan knows every run's shape, row length, batch and
precision, so it decides the placement once and refuses, in one line, a run no placement holds.

The estimate of one device's peak (`memory_bytes`) counts
- the training state: weights (fp32), their gradients (fp32) and AdamW's two moments (fp32),
  so 16 bytes per trained parameter and 4 per frozen one, whatever the precision: bf16 mixed
  precision keeps an fp32 master copy (prism.train.precision). Under bf16 the forward also holds
  bf16 copies of the weights (autocast's cast, FSDP's gathered blocks): 2 bytes per parameter.
  fsdp divides the state by the devices, hsdp by the devices of a node it shards over; ddp
  replicates it and adds its gradient buckets (4 bytes per trained parameter);
- the activations the backward keeps, per token of the micro-batch: per block 8 d_model + 3 ffn
  values in fp32 (the block's inputs, norms' outputs, q/k/v, attention output, the MLP's gate/up
  and its product; on rows up to 256 tokens also the CPU kernel's attention probabilities, heads
  x row length), 22 d_model + 6 ffn bytes under bf16 autocast (the residual stream stays
  fp32, the rest bf16); one block's again as the backward's working set; the logits and their
  gradient (fp32: 8 bytes per vocabulary row, bf16: 12 with the bf16 copy); the modality
  encoder's block likewise at its width.
A placement must leave MARGIN of the estimate free (allocator fragmentation, the runtime's own
buffers, what the estimate does not count): the estimate x (1 + MARGIN) fits the device.

Pure Python, no torch: the workflow decides its jobs from it before anything runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from prism.core.errors import PrismError
from prism.core.families import FamilySpec
from prism.model.config import backbone_config

GIB = 2**30
# Free memory a placement keeps on top of the estimate, as a share of the estimate: what the
# benchmark (tools/bench_memory.py) found the estimate may miss by.
MARGIN = 0.25
# The strategies that shard a run's state over its devices (ddp replicates it).
SHARDED = ("fsdp", "hsdp")
# Rows up to this many tokens: the fused CPU block keeps attention's probabilities (heads x row
# length a token) for its backward; longer rows take the flash kernel, which keeps none
# (prism/model/kernels/cpu.cpp, kExplicitMaxLen).
EXPLICIT_ATTENTION_MAX_LEN = 256
# The most nodes a refusal looks through for the count that would hold a run.
MAX_NODES = 1024


def host_memory_gb() -> float:
    """This machine's RAM in GiB: the device memory of a local (CPU) study."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    except (ValueError, OSError, AttributeError):
        return 16.0


@dataclass(frozen=True)
class Devices:
    """What a study's runs may be placed on: one device's memory, devices a node, nodes a run.

    `memory_gb` None is this host's RAM (a local CPU study). `precision` is the runs' resolved
    precision (fp32 or bf16), `strategy` how a run on several devices splits its state.
    """

    memory_gb: float | None = None
    per_node: int = 1
    nodes: int = 1
    nodes_by_backbone: dict[str, int] = field(default_factory=dict)
    precision: str = "fp32"
    strategy: str = "none"

    @property
    def memory_bytes(self) -> float:
        return (host_memory_gb() if self.memory_gb is None else self.memory_gb) * GIB

    def max_nodes(self, backbone: str) -> int:
        return int(self.nodes_by_backbone.get(backbone, self.nodes))

    def flags(self) -> list[str]:
        """The `prism isoflop plan` flags that give these devices (none where a default: a local study)."""
        out: list[str] = []
        if self.memory_gb is not None:
            out += ["--device-memory-gb", f"{self.memory_gb:g}"]
        if self.per_node != 1:
            out += ["--devices-per-node", str(self.per_node)]
        if self.nodes != 1:
            out += ["--nodes", str(self.nodes)]
        if self.nodes_by_backbone:
            out += ["--nodes-by-backbone", ",".join(f"{b}={n}" for b, n in sorted(self.nodes_by_backbone.items()))]
        if self.precision != "fp32":
            out += ["--precision", self.precision]
        if self.per_node * max(self.nodes, *self.nodes_by_backbone.values(), 1) > 1 and self.strategy != "none":
            out += ["--strategy", self.strategy]
        return out


@dataclass(frozen=True)
class RunShape:
    """What the estimate reads of a run: its parameters and layer shapes, and its row length."""

    params_total: float
    params_trained: float
    d_model: int
    n_layers: int
    ffn_dim: int
    vocab_rows: int
    row_len: int
    encoder_width: int = 0
    modality_tokens: int = 0
    n_heads: int = 0


def run_shape(backbone: str, spec: FamilySpec, params_total: float, params_trained: float, row_len: int) -> RunShape:
    """The shape of a run of `backbone` on `spec` (the family's shape and tokenizer)."""
    cfg = backbone_config(backbone, spec.vocab.rows)
    return RunShape(
        params_total, params_trained, cfg.d_model, cfg.n_layers, cfg.ffn_dim, cfg.vocab_size, row_len,
        spec.encoder_width, spec.n_modality_tokens, cfg.n_heads,
    )  # fmt: skip


@dataclass(frozen=True)
class Memory:
    """One device's estimated peak in bytes, by part."""

    state: float  # weights, gradients, optimizer state (and bf16 copies, ddp buckets)
    activations: float

    @property
    def total(self) -> float:
        return self.state + self.activations


def state_bytes(shape: RunShape, precision: str, strategy: str = "none", devices: int = 1, per_node: int = 1) -> float:
    """Weights, gradients and optimizer state on one of `devices` devices."""
    frozen = shape.params_total - shape.params_trained
    full = 16 * shape.params_trained + 4 * frozen + (2 * shape.params_total if precision == "bf16" else 0)
    if devices <= 1:
        return full
    if strategy not in SHARDED:  # ddp (or none): the whole state on every device, and ddp's buckets
        return full + 4 * shape.params_trained
    shards = min(devices, per_node) if strategy == "hsdp" else devices
    return full / shards


def activation_bytes(shape: RunShape, micro_batch: int, precision: str) -> float:
    """What the backward keeps for `micro_batch` rows (see the module docstring for what it counts)."""
    tokens = micro_batch * shape.row_len
    if precision == "bf16":
        block, logits = 22 * shape.d_model + 6 * shape.ffn_dim, 12 * shape.vocab_rows
        encoder = 22 * shape.encoder_width + 12 * shape.encoder_width
    else:
        block, logits = 4 * (8 * shape.d_model + 3 * shape.ffn_dim), 8 * shape.vocab_rows
        if shape.row_len <= EXPLICIT_ATTENTION_MAX_LEN:  # the CPU kernel keeps each head's probabilities
            block += 4 * shape.n_heads * shape.row_len
        encoder = 4 * (8 * shape.encoder_width + 6 * shape.encoder_width)
    return tokens * ((shape.n_layers + 1) * block + logits) + micro_batch * shape.modality_tokens * encoder


def memory_bytes(
    shape: RunShape, micro_batch: int, precision: str, strategy: str = "none", devices: int = 1, per_node: int = 1
) -> Memory:
    """One device's estimated peak for a run on `devices` devices at `micro_batch` rows a micro-step."""
    return Memory(
        state_bytes(shape, precision, strategy, devices, per_node), activation_bytes(shape, micro_batch, precision)
    )


@dataclass(frozen=True)
class Placement:
    """A run's devices, rows per device per micro-step, and micro-steps per optimizer step."""

    devices: int
    micro_batch: int
    accum_steps: int
    memory: Memory


def device_counts(global_batch: int, per_node: int, max_nodes: int) -> list[int]:
    """Device counts a run may take, fewest first: those of one node, then whole nodes; each divides the batch."""
    counts = [d for d in range(1, per_node + 1)] + [n * per_node for n in range(2, max_nodes + 1)]
    return [d for d in counts if global_batch % d == 0]


def largest_micro_batch(shape: RunShape, rows: int, capacity: float, devices: Devices, n: int) -> int | None:
    """The most rows (a divisor of `rows`) whose estimate x (1 + MARGIN) fits `capacity` on one of `n` devices."""
    for m in sorted((m for m in range(1, rows + 1) if rows % m == 0), reverse=True):
        need = memory_bytes(shape, m, devices.precision, devices.strategy, n, devices.per_node).total
        if need * (1 + MARGIN) <= capacity:
            return m
    return None


def place(shape: RunShape, global_batch: int, devices: Devices, max_nodes: int | None = None) -> Placement | None:
    """The fewest devices (within `max_nodes` nodes) that hold the run, with the largest micro-batch
    there and the accumulation that keeps `global_batch` = devices x micro_batch x accum_steps; None
    when no placement does."""
    nodes = devices.nodes if max_nodes is None else max_nodes
    capacity = devices.memory_bytes
    for n in device_counts(global_batch, devices.per_node, nodes):
        rows = global_batch // n
        m = largest_micro_batch(shape, rows, capacity, devices, n)
        if m is not None:
            memory = memory_bytes(shape, m, devices.precision, devices.strategy, n, devices.per_node)
            return Placement(n, m, rows // m, memory)
    return None


def refusal(run_id: str, backbone: str, shape: RunShape, global_batch: int, devices: Devices) -> str:
    """The one line refusing a run no placement holds, naming what would hold it."""
    nodes = devices.max_nodes(backbone)
    one = memory_bytes(shape, 1, devices.precision, devices.strategy, 1).total * (1 + MARGIN) / GIB
    where = f"{nodes} node(s) x {devices.per_node} device(s) of {devices.memory_bytes / GIB:.3g} GiB"
    sharded = devices.strategy in SHARDED
    more = sharded and next(
        (
            n
            for n in range(nodes + 1, MAX_NODES + 1)
            if global_batch % (n * devices.per_node) == 0
            and largest_micro_batch(
                shape, global_batch // (n * devices.per_node), devices.memory_bytes, devices, n * devices.per_node
            )
        ),
        None,
    )
    if not more and devices.strategy == "hsdp":  # hsdp shards within a node: more nodes only replicate
        wider = refusal(run_id, backbone, shape, global_batch, replace(devices, strategy="fsdp"))
        if "nodes_by_backbone" in wider:
            return wider.replace("; use ", "; use train.strategy fsdp and ").replace(", fsdp);", ", hsdp);")
    if not sharded and devices.per_node * nodes > 1:
        fix = f"train.strategy fsdp ({devices.strategy} keeps the whole state on every device)"
    elif more:
        fix = f"cluster.nodes_by_backbone {{{backbone}: {more}}}"
    else:
        fix = "a device with more memory (cluster.device_memory_gb) or a smaller backbone"
    return (
        f"run {run_id}: no placement on {where} holds it (one row on one device needs ~{one:.3g} GiB with "
        f"the {MARGIN:.0%} margin, {devices.precision}, {devices.strategy}); use {fix}"
    )


def place_rows(rows: list, devices: Devices, spec: FamilySpec) -> list:
    """The plan's rows with their placement (PlanRow.devices, micro_batch, accum_steps); the first
    run no placement holds stops the plan with its one line."""
    placed = []
    for row in rows:
        shape = run_shape(row.backbone, spec, row.params_total, row.params, int(row.tokens_per_sample))
        where = place(shape, row.global_batch, devices, devices.max_nodes(row.backbone))
        if where is None:
            raise PrismError(refusal(row.run_id, row.backbone, shape, row.global_batch, devices))
        placed.append(replace(row, devices=where.devices, micro_batch=where.micro_batch, accum_steps=where.accum_steps))
    return placed


def study_devices(cluster: dict, launcher: str, device: str, precision: str, strategy: str) -> Devices:
    """The devices of a study's config: its `cluster:` section where its launcher runs ranks on cluster
    nodes (`Launcher.cluster`: aurora), else one device of this host; `device` auto is the launcher's
    (`Launcher.device`: an aurora job's xpu, else a CPU)."""
    from prism.launch.ranks import cluster_ranks  # noqa: PLC0415 - beside its only use
    from prism.launch.registry import get  # noqa: PLC0415 - beside its only use
    from prism.train.precision import resolve  # noqa: PLC0415 - beside its only use

    per_node, _ = cluster_ranks(launcher, cluster)
    chosen = get(launcher)
    multi = chosen.cluster
    kind = device if device != "auto" else chosen.device
    return Devices(
        memory_gb=cluster.get("device_memory_gb"),
        per_node=per_node,
        nodes=int(cluster.get("nodes", 1)) if multi else 1,
        nodes_by_backbone={str(b): int(n) for b, n in (cluster.get("nodes_by_backbone") or {}).items()}
        if multi
        else {},
        precision=resolve(precision, kind),
        strategy=strategy,
    )


def parse_nodes_by_backbone(text: str | None) -> dict[str, int]:
    """`--nodes-by-backbone 7b=2,32b=8` as a mapping; a clear error for anything else."""
    out: dict[str, int] = {}
    for part in filter(None, (text or "").replace(" ", "").split(",")):
        name, _, count = part.partition("=")
        if not name or not count.isdigit() or int(count) < 1:
            raise PrismError(f"--nodes-by-backbone: {part!r} is not BACKBONE=NODES (e.g. 7b=2,32b=8)")
        out[name] = int(count)
    return out
