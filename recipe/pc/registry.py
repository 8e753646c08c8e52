"""Typed config keys, and the registries that let an allocator, a prompt filter or an allocation primitive own them.

A key group is a frozen dataclass of config keys (``KeyGroup``); each field names its key (``key(...)``) and its
Python type in the annotation, and a group owned by a component gives every field its default. ``register_keys``
adds such a group: its defaults enter the composed config (Hydra's ``pc_owned_keys`` node, in
``config/pc_trainer.yaml``'s defaults list, before the YAML and the command line), so a user overrides them without
``+`` and sees them in ``--cfg job``; ``PCSettings`` reads and checks every registered group.

The allocator and prompt-filter registries live here too, so that the settings find an allocator by name without
importing any (``recipe.pc.allocators.base.register`` and ``recipe.pc.stages.prompt_filter.register_prompt_filter``
fill them). This module imports nothing else of the project but its errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from typing import ClassVar

from omegaconf import OmegaConf

from recipe.pc.errors import PCConfigError, PCConfigErrors, problems_of

# The Hydra config node of every registered group's defaults, named in pc_trainer.yaml's defaults list.
OWNED_KEYS_NODE = "pc_owned_keys"

_ABSENT = object()


def key(name: str, default=_ABSENT, *, fallback: str | None = None, if_none=_ABSENT):
    """A field read from config key ``name``; ``default``: its value in the composed config (a registered group's
    fields all have one); ``fallback``: the key read when the value is null; ``if_none``: the value when both are
    null."""
    metadata = {"key": name, "fallback": fallback, "if_none": if_none}
    if default is _ABSENT:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def strict(name: str, value, annotation):
    """``value`` as ``annotation`` (bool, int, float, str, optionally ``| None``), or an error naming the key."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    nullable = type(None) in args
    base = next((a for a in args if a is not type(None)), annotation)
    if value is None and nullable:
        return None
    # bool is a subclass of int: keep true/false out of numeric keys and numbers out of flags.
    if base is bool and isinstance(value, bool):
        return value
    if base is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if base is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if base is str and isinstance(value, str):
        return value
    wanted = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}[base]
    null = " or null" if nullable else ""
    shown = "null" if value is None else f"{value!r} ({type(value).__name__})"
    raise PCConfigError(f"{name}={shown} must be {wanted}{null}")


def _read(config, meta: dict, annotation):
    name = meta["key"]
    value = OmegaConf.select(config, name, default=_ABSENT)
    if value is _ABSENT:
        raise PCConfigError(
            f"{name} is missing from the config; compose recipe/pc/config/pc_trainer.yaml (python -m "
            "recipe.pc.main_pc does), which sets every Pilot-Commit key"
        )
    if value is None and meta["fallback"]:
        name, value = meta["fallback"], OmegaConf.select(config, meta["fallback"], default=None)
    if value is None and meta["if_none"] is not _ABSENT:
        value = meta["if_none"]
    return strict(name, value, annotation)


def in_unit_interval(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise PCConfigError(f"{name}={value} must lie in [0, 1]")


class KeyGroup:
    """A frozen dataclass of config keys; nested groups are fields without a key. A group that a component owns
    (``register_keys``) sets ``name``, gives every field a default and may override ``check`` and
    ``prompt_filter``."""

    name: ClassVar[str] = ""  # a registered group's name: PCSettings.group(cls) finds it by it

    @classmethod
    def read(cls, config):
        """The group from ``config``, checked; every bad key of it (and of its nested groups) in one
        ``PCConfigErrors``, its own range checks run only when all its keys were read."""
        values, problems = cls._read_fields(config)
        if problems:
            raise PCConfigErrors(problems)
        group = cls(**values)
        group.validate()
        return group

    @classmethod
    def _read_fields(cls, config) -> tuple[dict, list[str]]:
        """The fields' values, and the problem lines of those that could not be read."""
        hints = typing.get_type_hints(cls)
        values, problems = {}, []
        for f in dataclasses.fields(cls):
            if f.metadata.get("owned"):
                continue  # filled by the class's own read (PCSettings: the registered groups)
            try:
                if "key" in f.metadata:
                    values[f.name] = _read(config, f.metadata, hints[f.name])
                else:
                    values[f.name] = hints[f.name].read(config)
            except PCConfigError as err:
                problems += problems_of(err)
        return values, problems

    @classmethod
    def keys(cls) -> list[str]:
        """Every config key the group (and its nested groups) reads, the keys read when one is null included."""
        hints = typing.get_type_hints(cls)
        found = []
        for f in dataclasses.fields(cls):
            if "key" in f.metadata:
                found += [f.metadata["key"], *([f.metadata["fallback"]] if f.metadata["fallback"] else [])]
            elif not f.metadata.get("owned"):
                found += hints[f.name].keys()
        return list(dict.fromkeys(found))

    @classmethod
    def defaults(cls) -> dict[str, object]:
        """Each key's default, by its dotted name."""
        return {f.metadata["key"]: f.default for f in dataclasses.fields(cls) if "key" in f.metadata}

    def validate(self) -> None:
        """Check the group's own ranges; the message names the key."""

    def check(self, pc) -> None:
        """Check the group against the run's other settings (``PCSettings``); the message names the keys."""

    def prompt_filter(self) -> str | None:
        """The prompt filter these settings pick when ``algorithm.prompt_filter`` is null (None: none)."""
        return None


KEY_GROUPS: dict[str, type[KeyGroup]] = {}
ALLOCATORS: dict[str, type] = {}  # filled by recipe.pc.allocators.base.register
PROMPT_FILTERS: dict[str, type] = {}  # filled by recipe.pc.stages.prompt_filter.register_prompt_filter


def register_keys(cls: type[KeyGroup]) -> type[KeyGroup]:
    """Add an owned key group: its defaults join the composed config and ``PCSettings`` reads it."""
    if not cls.name or KEY_GROUPS.get(cls.name, cls) is not cls:
        raise ValueError(f"key group {cls.__name__} needs a unique name, got {cls.name!r}")
    fields = [f for f in dataclasses.fields(cls) if "key" in f.metadata]
    missing = [f.metadata["key"] for f in fields if f.default is dataclasses.MISSING]
    if missing:
        raise ValueError(f"key group {cls.__name__}: {missing} need a default (the composed config's value)")
    taken = {k: g.name for g in KEY_GROUPS.values() if g is not cls for k in g.defaults()}
    clash = sorted(k for k in cls.defaults() if k in taken)
    if clash:
        raise ValueError(f"key group {cls.__name__}: {clash} already belong to {sorted({taken[k] for k in clash})}")
    KEY_GROUPS[cls.name] = cls
    _store_owned_keys()
    return cls


@contextlib.contextmanager
def registrations_undone():
    """Whatever is registered inside the block (allocators, prompt filters, key groups) is gone after it: for a test
    that imports an allocator's or a filter's module, so that later tests see the project's registrations only."""
    saved = [(registry, dict(registry)) for registry in (ALLOCATORS, PROMPT_FILTERS, KEY_GROUPS)]
    try:
        yield
    finally:
        for registry, before in saved:
            registry.clear()
            registry.update(before)
        _store_owned_keys()


def owned_defaults() -> dict:
    """Every registered group's defaults as a nested config tree."""
    tree = OmegaConf.create()
    for group in KEY_GROUPS.values():
        for name, value in group.defaults().items():
            OmegaConf.update(tree, name, value, force_add=True)
    return OmegaConf.to_container(tree)


def _store_owned_keys() -> None:
    """(Re)write the ``pc_owned_keys`` node that the trainer's config composes, after each registration."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=OWNED_KEYS_NODE, node=owned_defaults())


_store_owned_keys()  # an empty node, so that composing before any registration names what is missing, not the node
