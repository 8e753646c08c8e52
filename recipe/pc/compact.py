"""Compact storage of buffered pilot rollouts, and the one-pass assembly of a training batch.

A verl rollout row holds about seven int64 tensors of which most are derivable from the others
(``input_ids`` is ``prompts`` then ``responses``, ``position_ids`` follow the attention mask,
``token_level_scores`` repeats ``rm_scores``). ``CompactRows`` keeps only what cannot be derived, in
the smallest exact dtype, and checks every derivation on the stored rows, so a field that does not
follow the usual layout (multi-turn masks, multimodal positions) is simply stored instead. Rows are
rebuilt straight into their slice of the training batch by ``assemble``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import TensorDict
from verl import DataProto

# Derived fields and what they derive from, tried in this order (verl's rollout row layout).
CONCAT_FIELDS = {"input_ids": ("prompts", "responses")}
POSITION_FIELDS = {"position_ids": "attention_mask"}
TAIL_FIELDS = {"response_mask": "attention_mask"}
ALIAS_CANDIDATES = {"token_level_scores": ("rm_scores",)}

_INT_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
# Row blocks for copies and checks that need temporaries: a block's temporary stays below glibc's mmap
# threshold, so it is recycled instead of costing fresh pages (one fault per 4 KiB) every time.
BLOCK_ROWS = 256


def _narrowest_int(x: torch.Tensor) -> torch.dtype:
    """Smallest dtype that holds every value of the integer/bool tensor ``x`` exactly."""
    if x.numel() == 0 or x.dtype == torch.bool:
        return torch.bool if x.dtype == torch.bool else torch.uint8
    lo, hi = (int(v) for v in torch.aminmax(x))
    return int_dtype_for(lo, hi)


def int_dtype_for(lo: int, hi: int) -> torch.dtype:
    """Smallest dtype that holds every integer in [lo, hi] exactly, as stored rows keep them."""
    if lo >= 0 and hi <= 1:
        return torch.bool
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32):
        info = torch.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    return torch.int64


def positions_from_mask(mask: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """verl's ``compute_position_id_with_mask``: running count of attended tokens, from 0."""
    out = torch.cumsum(mask, dim=-1, out=out)
    return out.sub_(1).clamp_(min=0)


@dataclass
class Field:
    """How one tensor field is kept. ``kind`` is one of:

    dense: ``data`` per row; per_group: ``data`` per group of rows (all rows of a group equal);
    sparse: at most one non-zero per row, ``data`` the values and ``cols`` their columns;
    concat / positions / tail / alias: derived from ``source`` fields at assembly.
    """

    kind: str
    dtype: torch.dtype
    shape: tuple[int, ...]  # per-row shape
    data: torch.Tensor | None = None
    cols: torch.Tensor | None = None
    source: tuple[str, ...] = ()

    def to_plain(self) -> dict:
        return {
            "kind": self.kind,
            "dtype": str(self.dtype).removeprefix("torch."),
            "shape": list(self.shape),
            "data": self.data,
            "cols": self.cols,
            "source": list(self.source),
        }

    @classmethod
    def from_plain(cls, d: dict) -> Field:
        return cls(
            kind=d["kind"],
            dtype=getattr(torch, d["dtype"]),
            shape=tuple(d["shape"]),
            data=d["data"],
            cols=d["cols"],
            source=tuple(d["source"]),
        )

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.data, self.cols) if t is not None)


@dataclass
class CompactRows:
    """Rows of ``group`` consecutive rollouts per prompt, tensors compacted, non-tensor fields as they were."""

    num_rows: int
    group: int
    fields: dict[str, Field]
    non_tensor: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, rows: DataProto, group: int, groups: np.ndarray | None = None) -> CompactRows:
        """Keep ``groups`` (positions of whole groups of ``group`` consecutive rows; all when None).

        The layout checks run on all of ``rows``, so only the kept rows are ever copied.
        """
        if len(rows) % group:
            raise ValueError(f"{len(rows)} rows do not form whole groups of {group}")
        groups = np.arange(len(rows) // group) if groups is None else np.asarray(groups, dtype=np.int64)
        row_idx = (groups[:, None] * group + np.arange(group)).reshape(-1)
        select = {"rows": torch.from_numpy(row_idx), "groups": torch.from_numpy(groups)}
        td = rows.batch
        derivable = set(CONCAT_FIELDS) | set(POSITION_FIELDS) | set(TAIL_FIELDS) | set(ALIAS_CANDIDATES)
        encoded: dict[str, Field] = {}
        # Sources first, so a derivable field can be checked against them; then back in the rows' key order.
        for key in sorted(td.keys(), key=lambda k: k in derivable):
            encoded[key] = _encode(key, td[key], td, encoded, group, select)
        fields = {key: encoded[key] for key in td.keys()}
        non_tensor = {k: np.asarray(v)[row_idx] for k, v in rows.non_tensor_batch.items()}
        return cls(len(row_idx), group, fields, non_tensor)

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.fields.values())

    def take_groups(self, groups: np.ndarray) -> CompactRows:
        """The rows of these groups only, in this order (used to write a smaller checkpoint)."""
        groups = np.asarray(groups, dtype=np.int64)
        rows = (groups[:, None] * self.group + np.arange(self.group)).reshape(-1)
        g_idx, r_idx = torch.from_numpy(groups), torch.from_numpy(rows)
        fields = {}
        for key, f in self.fields.items():
            idx = g_idx if f.kind == "per_group" else r_idx
            fields[key] = Field(
                f.kind,
                f.dtype,
                f.shape,
                None if f.data is None else f.data.index_select(0, idx),
                None if f.cols is None else f.cols.index_select(0, idx),
                f.source,
            )
        return CompactRows(len(rows), self.group, fields, {k: v[rows] for k, v in self.non_tensor.items()})

    def to_plain(self) -> dict:
        return {
            "num_rows": self.num_rows,
            "group": self.group,
            "fields": {k: f.to_plain() for k, f in self.fields.items()},
        }

    @classmethod
    def from_plain(cls, d: dict, non_tensor: dict[str, np.ndarray]) -> CompactRows:
        fields = {k: Field.from_plain(f) for k, f in d["fields"].items()}
        return cls(int(d["num_rows"]), int(d["group"]), fields, non_tensor)


def _encode(key: str, x: torch.Tensor, td: TensorDict, done: dict[str, Field], group: int, select: dict) -> Field:
    shape = tuple(x.shape[1:])
    for other in ALIAS_CANDIDATES.get(key, ()):
        if other in done and td[other].dtype == x.dtype and torch.equal(td[other], x):
            return Field("alias", x.dtype, shape, source=(other,))
    parts = CONCAT_FIELDS.get(key)
    if parts and all(p in done for p in parts) and x.dim() == 2:
        a, b = td[parts[0]], td[parts[1]]
        if a.dim() == 2 and a.shape[1] + b.shape[1] == x.shape[1] and a.dtype == b.dtype == x.dtype:
            if torch.equal(x[:, : a.shape[1]], a) and torch.equal(x[:, a.shape[1] :], b):
                return Field("concat", x.dtype, shape, source=parts)
    src = POSITION_FIELDS.get(key)
    if src in done and x.dim() == 2 and td[src].shape == x.shape and x.dtype == td[src].dtype:
        if _positions_follow(x, td[src]):
            return Field("positions", x.dtype, shape, source=(src,))
    src = TAIL_FIELDS.get(key)
    if src in done and x.dim() == 2 and td[src].dim() == 2 and td[src].shape[1] >= x.shape[1]:
        if td[src].dtype == x.dtype and torch.equal(td[src][:, td[src].shape[1] - x.shape[1] :], x):
            return Field("tail", x.dtype, shape, source=(src,))
    if x.dtype.is_floating_point and x.dim() == 2:
        # One scan for the non-zeros (a score row has at most one), no full-size temporaries.
        row, col = x.nonzero(as_tuple=True)
        if row.numel() == 0 or int(torch.bincount(row).max()) <= 1:
            cols = torch.zeros(x.shape[0], dtype=torch.int32)
            cols[row] = col.to(torch.int32)
            cols = cols.index_select(0, select["rows"])
            values = x.reshape(-1).index_select(0, select["rows"] * x.shape[1] + cols)
            return Field("sparse", x.dtype, shape, data=values, cols=cols)
    grouped = x.reshape(x.shape[0] // group, group, *shape)
    # One group first: most fields differ within a group, and that rejects them without a full pass.
    if torch.equal(grouped[:1], grouped[:1, :1].expand_as(grouped[:1])) and torch.equal(
        grouped, grouped[:, :1].expand_as(grouped)
    ):
        data = grouped[:, 0].index_select(0, select["groups"])
        if x.dtype in _INT_DTYPES:
            data = data.to(_narrowest_int(data))
        return Field("per_group", x.dtype, shape, data=data.contiguous())
    # Range of all rows (a superset of the kept ones): a read-only pass instead of a full-size copy.
    dtype = _narrowest_int(x) if x.dtype in _INT_DTYPES else x.dtype
    rows = select["rows"]
    data = torch.empty((len(rows), *shape), dtype=dtype)
    for at in range(0, len(rows), BLOCK_ROWS):
        data[at : at + BLOCK_ROWS] = x.index_select(0, rows[at : at + BLOCK_ROWS])
    return Field("dense", x.dtype, shape, data=data)


def _positions_follow(x: torch.Tensor, mask: torch.Tensor) -> bool:
    """``x`` equals the positions derived from ``mask``, checked block by block into one scratch tensor."""
    scratch = torch.empty((min(BLOCK_ROWS, x.shape[0]), *x.shape[1:]), dtype=x.dtype)
    for at in range(0, x.shape[0], BLOCK_ROWS):
        part = scratch[: min(BLOCK_ROWS, x.shape[0] - at)]
        positions_from_mask(mask[at : at + BLOCK_ROWS], out=part)
        if not torch.equal(part, x[at : at + BLOCK_ROWS]):
            return False
    return True


@dataclass
class Segment:
    """Rows to place in a training batch: ``index`` rows of ``rows`` (all of them when None)."""

    rows: CompactRows | DataProto
    index: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.index) if self.index is not None else _num_rows(self.rows)

    @property
    def non_tensor(self) -> dict[str, np.ndarray]:
        return self.rows.non_tensor if isinstance(self.rows, CompactRows) else self.rows.non_tensor_batch

    def column(self, key: str) -> np.ndarray:
        """The segment's rows of one non-tensor field."""
        values = self.non_tensor[key]
        return values if self.index is None else values[self.index]

    def tensor_keys(self) -> set[str]:
        if isinstance(self.rows, CompactRows):
            return set(self.rows.fields)
        return set(self.rows.batch.keys()) if self.rows.batch is not None else set()

    def tensor_spec(self, key: str) -> tuple[torch.dtype, tuple[int, ...]]:
        if isinstance(self.rows, CompactRows):
            f = self.rows.fields[key]
            return f.dtype, f.shape
        t = self.rows.batch[key]
        return t.dtype, tuple(t.shape[1:])


def _num_rows(rows: CompactRows | DataProto) -> int:
    return rows.num_rows if isinstance(rows, CompactRows) else len(rows)


class BatchBuffers:
    """Output tensors reused from step to step, so a step's batch is not written into fresh pages.

    Safe only while nothing holds a view of the previous batch when the next one is assembled: the
    trainer's update has returned (workers got copies) and its logging is done by then.
    """

    def __init__(self) -> None:
        self._store: dict[str, torch.Tensor] = {}

    def get(self, key: str, rows: int, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        held = self._store.get(key)
        if held is None or held.dtype != dtype or tuple(held.shape[1:]) != shape or held.shape[0] < rows:
            held = torch.empty((rows, *shape), dtype=dtype)
            self._store[key] = held
        return held[:rows]

    def release(self) -> None:
        self._store.clear()


def assemble(segments: list[Segment], buffers: BatchBuffers | None, what: str) -> DataProto:
    """Write every segment's rows, in order, into one batch allocated once (or reused from ``buffers``)."""
    segments = [s for s in segments if len(s)]
    if not segments:
        raise RuntimeError(f"no rows to assemble for {what}")
    keys, nt_keys = segments[0].tensor_keys(), set(segments[0].non_tensor)
    for s in segments[1:]:
        if s.tensor_keys() != keys or set(s.non_tensor) != nt_keys:
            diff = sorted((s.tensor_keys() ^ keys) | (set(s.non_tensor) ^ nt_keys))
            raise RuntimeError(f"cannot concatenate {what}: fields {diff} are present in only some of them")
    total = sum(len(s) for s in segments)
    order = _decode_order(segments[0])
    out: dict[str, torch.Tensor] = {}
    for key in order:
        dtype, shape = segments[0].tensor_spec(key)
        for s in segments[1:]:
            if s.tensor_spec(key) != (dtype, shape):
                raise RuntimeError(
                    f"cannot concatenate {what}: field {key!r} is {s.tensor_spec(key)} and {dtype, shape}"
                )
        out[key] = (
            buffers.get(key, total, dtype, shape) if buffers is not None else torch.empty((total, *shape), dtype=dtype)
        )
    start = 0
    for s in segments:
        stop = start + len(s)
        index = None if s.index is None else torch.from_numpy(np.asarray(s.index, dtype=np.int64))
        if isinstance(s.rows, CompactRows):
            for key in order:
                _decode_into(s.rows, key, index, out, start, stop)
        else:
            for key in order:
                src = s.rows.batch[key]
                if index is None:
                    out[key][start:stop].copy_(src)
                else:
                    torch.index_select(src, 0, index, out=out[key][start:stop])
        start = stop
    non_tensor = {k: np.concatenate([s.column(k) for s in segments]) for k in segments[0].non_tensor}
    # Key order as the rollout produced it, so the batch looks exactly like a concatenated one.
    batch = TensorDict({k: out[k] for k in _key_order(segments[0])}, batch_size=[total])
    return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info={})


def _key_order(segment: Segment) -> list[str]:
    return list(segment.rows.fields) if isinstance(segment.rows, CompactRows) else list(segment.rows.batch.keys())


def _decode_order(segment: Segment) -> list[str]:
    """Fields in an order where every derived field comes after its sources."""
    if not isinstance(segment.rows, CompactRows):
        return _key_order(segment)
    fields, order, seen = segment.rows.fields, [], set()

    def visit(key: str) -> None:
        if key in seen:
            return
        seen.add(key)
        for src in fields[key].source:
            visit(src)
        order.append(key)

    for key in fields:
        visit(key)
    return order


def _decode_into(rows: CompactRows, key: str, index, out: dict, start: int, stop: int) -> None:
    f, dst = rows.fields[key], out[key][start:stop]
    if f.kind in ("dense", "per_group"):
        rows_idx = index if index is not None else torch.arange(rows.num_rows)
        if f.kind == "per_group":
            rows_idx = torch.div(rows_idx, rows.group, rounding_mode="floor")
        for at in range(0, len(rows_idx), BLOCK_ROWS):
            dst[at : at + BLOCK_ROWS].copy_(f.data.index_select(0, rows_idx[at : at + BLOCK_ROWS]))
    elif f.kind == "sparse":
        values = f.data if index is None else f.data.index_select(0, index)
        cols = (f.cols if index is None else f.cols.index_select(0, index)).long()
        dst.zero_().scatter_(1, cols[:, None], values[:, None])
    elif f.kind == "alias":
        dst.copy_(out[f.source[0]][start:stop])
    elif f.kind == "concat":
        a = out[f.source[0]][start:stop]
        dst[:, : a.shape[1]].copy_(a)
        dst[:, a.shape[1] :].copy_(out[f.source[1]][start:stop])
    elif f.kind == "positions":
        positions_from_mask(out[f.source[0]][start:stop], out=dst)
    elif f.kind == "tail":
        src = out[f.source[0]][start:stop]
        dst.copy_(src[:, src.shape[1] - dst.shape[1] :])
    else:
        raise ValueError(f"unknown stored field kind {f.kind!r} for {key!r}")
