"""What an engine module provides: one `Engine` object holding everything that differs between engines.

The rest of sparktui asks the registry (`engines.get_engine(name)`) and reads these attributes; it never
branches on an engine's name. A new engine is one module that defines an Engine subclass and one line
in the registry (engines/__init__.py). See docs/architecture.md, "Where an engine lives".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar, Mapping

from ..diagnosis import quickre
from . import common, metricnames
from .common import Context, Spot, Step
from .logrules import LogRules, compile_rules
from .logsigns import Sign


@dataclass(frozen=True)
class CommunityImage:
    """A family of community-built images known by name (core/plan/image_community.py recognises a reference)."""

    repos: tuple[str, ...]  # Docker Hub repositories, without a registry host
    local_tags: tuple[str, ...] = ()  # what the builder's own script tags a pulled image as
    what: str = ""  # in words: which engine source it builds
    ray: bool | None = None  # Ray installed (None: not known)
    nccl: str = ""  # where its NCCL comes from, in words
    env: Mapping[str, str] = field(default_factory=dict)  # variables it reads that a plan may set -> meaning
    tp_all_reduce: str = ""  # the collective it can put in NCCL's place for TP across nodes, in words
    source: str = ""  # where these facts were read


# The shared vocabulary: what a launch means, whatever the engine calls it. An engine maps the terms it
# has onto its own flags (Engine.vocabulary); pivot carries a flag over when both engines have its term.
TERMS = {
    "model": "the checkpoint directory",
    "tp": "tensor-parallel size",
    "pp": "pipeline-parallel size",
    "served_name": "the name the API serves",
    "context_length": "context length cap",
    "mem_fraction": "share of GPU memory",
    "api_key": "key the API demands",
    "trust_remote_code": "run the model's own code",
    "dtype": "weight dtype",
    "kv_cache_dtype": "KV cache dtype",
    "quantization": "quantization method",
    "load_format": "checkpoint format",
    "download_dir": "download directory",
    "chat_template": "chat template",
    "revision": "model revision",
    "tool_call_parser": "tool-call parser",
    "reasoning_parser": "reasoning parser",
    "tokenizer": "tokenizer path",
    "seed": "random seed",
    "max_running": "most requests run at once",
    "eager": "no CUDA graphs",
}

# Launch shapes a mode can have: every rank runs the engine with its rank's flags; a Ray cluster first,
# then one driver on the head; one MPI launcher on the head starting every rank.
SHAPES = ("ranks", "ray-driver", "mpi")
ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"


class Engine(ABC):
    """One inference engine. Subclasses set the class attributes and write `steps` and `node_env`."""

    name: ClassVar[str]  # registry key, image/port key in the config, container-name part
    label: ClassVar[str]  # as people write it: "SGLang"
    modes: ClassVar[tuple[str, ...]]  # the first is the default
    shapes: ClassVar[Mapping[str, str]]  # mode -> one of SHAPES
    mode_labels: ClassVar[Mapping[str, str]] = {}  # mode -> as people write it, where it differs
    default_port: ClassVar[int]  # HTTP port on the head unless the config says otherwise
    default_image: ClassVar[str | None] = None  # for engines the config's `images:` section has no key for
    image_note: ClassVar[str] = ""  # where its image comes from, for the written config's comment
    package: ClassVar[str]  # the Python distribution whose version is the engine release in an image
    # the support check (core/plan/support.py): Python run by the image's python3 that defines registry_archs(),
    # quant_methods() and config_types(); None: this engine's images are not asked ("could not check")
    support_probe: ClassVar[str | None] = None
    # whether the pivot key (a pivot without --to) steps onto this engine; one that a launch must choose on
    # purpose (its own launcher, flags it refuses) is reached with `pivot --to NAME` or the launch form
    in_pivot_cycle: ClassVar[bool] = True
    support_newer_image: ClassVar[str | None] = None  # the image release to name as the way out
    # whether an architecture missing from the registry still loads through the engine's Transformers backend
    # (slower: a warning); False: the engine refuses it (the check says unsupported)
    transformers_fallback: ClassVar[bool] = True
    health_paths: ClassVar[tuple[str, ...]]
    ready_line: ClassVar[str]
    # the variable that pins the engine's own sockets to a node's fabric address (None: the engine takes
    # interfaces only, e.g. an MPI launch through NCCL/UCX/OpenMPI interface variables)
    host_ip_env: ClassVar[str | None] = None
    api_key_env: ClassVar[str | None] = None  # a variable the engine also reads its API key from
    vocabulary: ClassVar[Mapping[str, str]]  # shared term (TERMS) -> this engine's flag
    companions: ClassVar[Mapping[str, str]] = {}  # flag -> the flag it needs beside it in this engine
    # for reading a user's extra flags (pivot): its flags that take no value, and those its plan writes itself in
    # every spelling the engine takes (never carried over: the new plan writes its own)
    switches: ClassVar[frozenset[str]] = frozenset()
    managed_flags: ClassVar[frozenset[str]] = frozenset()
    not_carried: ClassVar[Mapping[str, str]] = {}  # shared term this engine has no flag for -> what to do instead
    # fit semantics: the fraction NVIDIA's DGX Spark examples use, what it covers, and whether the
    # activations live inside it (vLLM) or outside (SGLang)
    fit_fraction: ClassVar[float] = 0.8
    fit_covers: ClassVar[str] = "weights and KV cache"
    activations_in_budget: ClassVar[bool] = True
    kv_cache_bytes_flag: ClassVar[str | None] = None  # a flag that sizes the KV cache in bytes (memory advice)
    embeddings_replicated_by: ClassVar[str | None] = None  # a flag that makes every GPU hold the embeddings
    # what the engine holds once loaded (core/plan/fit.py after_load): whether the fraction is a share of the memory
    # free after the weights (TensorRT-LLM) rather than of the total, and a flag that sizes the KV cache in bytes
    # instead of the fraction (None: the engine has none)
    fraction_of_free: ClassVar[bool] = False
    fraction_flag: ClassVar[str | None] = None  # the fraction's flag where vocabulary has no mem_fraction term
    kv_bytes_flag: ClassVar[str | None] = None
    kv_bytes_since: ClassVar[str | None] = None  # the first release with kv_bytes_flag (None: every release)
    auto_len_since: ClassVar[str | None] = None  # the first release whose context-length flag takes "auto"
    # PyTorch's CUDA allocator: whether the KV cache and the activations come from its caching allocator, so
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True hands back the blocks it reserves and does not use;
    # why not, when it does not; flags under which the engine's own allocator refuses expandable segments
    torch_allocator: ClassVar[bool] = False
    torch_allocator_note: ClassVar[str] = ""
    expandable_refused_by: ClassVar[Mapping[str, str]] = {}
    log_words: ClassVar[tuple[str, ...]] = ()  # lower-case words that mark a log as this engine's
    reads_neutral_logs: ClassVar[bool] = False  # its rule set reads a log that names no engine
    hang_pivot: ClassVar[tuple[str, str] | None] = None  # (engine, why) to suggest when a launch hangs
    metrics_path: ClassVar[str] = "/metrics"  # where its Prometheus text is served
    # field (metricnames.FIELDS) -> its series in the newest release; (field, release that renamed it, the name
    # before) for older ones
    metric_series: ClassVar[Mapping[str, str]] = {}
    metric_renamed: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    # -- its own log lines; the engine-neutral ones (NCCL, OOM, tracebacks) are logsigns'. Put together once per
    # engine (log_rules), so reading a line never asks which engine a sign is for.
    dist_begin: ClassVar[quickre.Quick | None] = None  # opens distributed init: silence after it is a hang
    dist_end: ClassVar[quickre.Quick | None] = None  # closes it
    ready_sign: ClassVar[quickre.Quick | None] = None  # the server is up; None: ready_line as written
    signs: ClassVar[tuple[Sign, ...]] = ()  # failure signatures only its logs hold, tried before the shared ones
    # phase (phases.PHASES) -> a regex of its own lines that show a rank reached it; every registered engine's
    # join the shared ones, since a saved log's engine is not always known (phases.phase_signs)
    phase_signs: ClassVar[Mapping[str, str]] = {}  # keyed by states.Phase (or its plain word)
    # what to check when distributed init goes silent; the variables that advice asks for; and the next likely
    # cause once the plan set them all on every node (only a check across the nodes tells the path apart)
    hang_advice: ClassVar[str] = (
        "a rank cannot reach the rendezvous: the head's address must be on the fabric "
        "subnet and each node's interface variables name its interface there; "
        "`sparktui preflight` checks them"
    )
    hang_env: ClassVar[tuple[str, ...]] = ()
    hang_advice_env_set: ClassVar[str] = ""
    no_metrics_hint: ClassVar[str] = "this engine release serves no /metrics"
    # sparkrun recipes: runtime (as resolved) -> mode (None: the default), and the commands that run it
    recipe_runtimes: ClassVar[Mapping[str, str | None]] = {}
    recipe_programs: ClassVar[tuple[tuple[str, ...], ...]] = ()
    recipe_flags: ClassVar[Mapping[str, str]] = {}  # sparkrun defaults key -> this engine's flag
    recipe_negated: ClassVar[frozenset[str]] = frozenset()  # switches on by default: false is --no-<flag>
    recipe_command_hint: ClassVar[tuple[str, str] | None] = None  # (regex on a runtime-less command, runtime)
    # the serving benchmark client this engine's image carries (argv words, e.g. vLLM's `vllm bench serve`);
    # `sparktui bench` runs one such client for every engine so rows compare (core/bench/client.py)
    bench_client: ClassVar[tuple[str, ...] | None] = None
    community_images: ClassVar[tuple[CommunityImage, ...]] = ()  # images known by name (image_community.py)

    # -- launch -------------------------------------------------------------------------------
    @abstractmethod
    def node_env(self, ctx: Context, spot: Spot) -> dict[str, str]:
        """The engine's own environment on one node."""

    @abstractmethod
    def steps(self, ctx: Context) -> list[Step]:
        """Every launch action, in order."""

    def interface_env(self, spot: Spot) -> dict[str, str]:
        """The variables that keep every library's sockets on the node's rendezvous interface."""
        return common.interface_env(spot)

    def plan_refusals(self, ctx: Context) -> list[str]:
        """Why this plan cannot run on this engine as asked (errors on the plan); empty when it can."""
        return []

    def plan_warnings(self, ctx: Context) -> list[str]:
        """What the plan should know about this engine here (warnings on the plan): what does not carry over."""
        return []

    def alloc_conf(self, extra_args) -> tuple[str | None, str]:
        """(PYTORCH_CUDA_ALLOC_CONF for this launch, why) -- None where the engine's allocator ignores or refuses
        expandable segments with these flags."""
        if not self.torch_allocator:
            return None, self.torch_allocator_note or f"{self.label} does not allocate its KV cache through PyTorch"
        given = {str(w).split("=", 1)[0] for w in extra_args or () if str(w).startswith("--")}
        for flag, why in self.expandable_refused_by.items():
            if flag in given:
                return None, f"not set: {why}"
        return EXPANDABLE, (
            f"{self.label}'s KV cache comes from PyTorch's allocator, which then gives back the "
            f"blocks it reserves and does not use"
        )

    def shape(self, mode: str) -> str:
        return self.shapes.get(mode, SHAPES[0])

    def choice_label(self, mode: str) -> str:
        """How the launch form lists engine and mode: "SGLang", "vLLM (Ray)"."""
        return self.label if len(self.modes) == 1 else f"{self.label} ({self.mode_labels.get(mode, mode)})"

    # -- releases -----------------------------------------------------------------------------
    def pick_mode(self, info, version: str | None) -> tuple[str, str]:
        """(mode, why) when none was asked for, given the image's inspection (image.ImageInfo or None)."""
        return self.modes[0], ""

    def tp_collectives(self, env: Mapping[str, str], image) -> dict | None:
        """How tensor-parallel all-reduces cross nodes when not through NCCL alone, as the env asks of the
        image (image_community.Known or None); None when NCCL carries them all."""
        return None

    def refusals(self, mode: str, image: str, info, version: str | None) -> list[str]:
        """Why this release or image cannot run `mode`, each with the way out; empty when it can."""
        return []

    def resolve_recipe(
        self, runtime: str, builder: str, data: dict, defaults: dict, cmd: str
    ) -> tuple[str, str, str | None] | None:
        """(runtime, builder, why) where sparkrun resolves this runtime further (recipe_rules.resolve_runtime)."""
        return None

    def bad_arguments_hint(self, text: str) -> str | None:
        """A better hint for "unrecognized arguments" in this text, when the cause is known."""
        return None

    # -- metrics, hangs -------------------------------------------------------------------------
    def metric_names(self, version: str | None) -> dict[str, str]:
        """field -> series name in this release (an unknown release gets the newest names)."""
        return metricnames.names_at(self.metric_series, self.metric_renamed, version)

    def metric_candidates(self, version: str | None) -> dict[str, tuple[str, ...]]:
        """field -> names to look for, this release's first: an image whose release is unknown still reads."""
        return metricnames.candidates_at(self.metric_series, self.metric_renamed, version)

    def hang_hint(self, env_set=frozenset()) -> str:
        """The hang advice, or the next likely cause when the plan already set what it asks for."""
        if self.hang_advice_env_set and set(self.hang_env) <= set(env_set):
            return self.hang_advice_env_set
        return self.hang_advice

    @cached_property
    def log_rules(self) -> LogRules:
        """Its log lines and the shared signs, in the order diagnosis tries them; the registry builds this once."""
        return compile_rules(self)

    # -- flags --------------------------------------------------------------------------------
    def flag(self, term: str) -> str | None:
        """This engine's flag for a shared term, None when it has none."""
        return self.vocabulary.get(term)

    def term(self, flag: str) -> str | None:
        """The shared term one of this engine's flags stands for."""
        return next((t for t, f in self.vocabulary.items() if f == flag), None)

    def __repr__(self) -> str:
        return f"<engine {self.name}>"
