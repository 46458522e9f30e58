"""Tests of the SFT and RL configurations (:mod:`tailmiss.llm.config`): TOML round trip and validation."""

from __future__ import annotations

import pytest

from tailmiss.io import ConfigError, write_toml
from tailmiss.llm import MazeTask, ModelConfig, MultiSolutionTask, RLConfig, SFTConfig, load_config
from tailmiss.llm.checkpoint import read_run_config
from tailmiss.llm.optim import FLAT_KEYS, SFT_OPTIM, OptimConfig
from tailmiss.objectives import LossConfig, resolve_loss_config

OPTIM_FIELDS = set(FLAT_KEYS) - {"optimizer"}
FLAT_KEYS_BY_NEW = {new: old for old, new in FLAT_KEYS.items()}

TINY_SFT = SFTConfig(
    task=MultiSolutionTask(num_digits=2),
    model=ModelConfig(1, 2, 16),
    steps=6,
    batch_size=8,
    eval_every=3,
    eval_prompts=4,
    checkpoint_every=2,
    log_every=1,
)
TINY_RL = RLConfig(group_size=4, prompts_per_step=4, steps=4, eval_every=2, eval_prompts=4, checkpoint_every=2)

SFT_TOML = """\
[sft]
name = "tiny"
steps = 5

[sft.task]
name = "multisolution"
num_digits = 2

[sft.model]
n_layer = 1
n_head = 2
n_embd = 16
"""


def _write(tmp_path, text: str, name: str = "cfg.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# --- round trip ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        SFTConfig(),
        TINY_SFT,
        TINY_SFT.replace(
            name="maze-x",
            task=MazeTask(size=9, heldout_fraction=0.2),
            model=ModelConfig(3, 4, 32, mlp_ratio=2),
            optim=TINY_SFT.optim.replace(lr_schedule="constant", betas=(0.8, 0.95)),
            eval_split="train",
            seed=7,
        ),
        TINY_SFT.replace(task=MultiSolutionTask(num_digits=3, min_allowed=3, max_allowed=6, zipf_exponent=0.0)),
    ],
    ids=["default", "tiny", "maze", "multisolution-params"],
)
def test_sft_toml_round_trip(tmp_path, cfg):
    path = tmp_path / "sft.toml"
    cfg.to_toml(path)
    back = SFTConfig.from_toml(path)
    assert back == cfg
    assert back.task == cfg.task and type(back.task) is type(cfg.task)
    assert back.model == cfg.model
    assert isinstance(back.optim.betas, tuple)
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    "cfg",
    [
        RLConfig(),
        TINY_RL,
        TINY_RL.replace(loss=LossConfig(clip_high=0.3)),
        TINY_RL.replace(
            method="cispo",
            gamma=0.5,
            advantage="mean",
            loss=LossConfig(
                clip_low=0.5, clip_high=4.0, cispo_clip_mode="absolute", aggregation="token-sum-norm", norm_length=8
            ),
            dynamic_sampling=True,
            max_refills=3,
            kl_coef=0.01,
            entropy_coef=0.001,
            top_k=5,
            top_p=0.9,
            temperature=0.7,
            eval_samples=8,
            rare_share=0.2,
        ),
        TINY_RL.replace(method="grpo", loss=LossConfig(dual_clip=3.0), minibatches=4),
    ],
    ids=["default", "tiny", "clip-high", "every-override", "dual-clip"],
)
def test_rl_toml_round_trip(tmp_path, cfg):
    path = tmp_path / "rl.toml"
    cfg.to_toml(path)
    back = RLConfig.from_toml(path)
    assert back == cfg
    assert load_config(path) == cfg


def test_rl_toml_omits_none_fields(tmp_path):
    cfg = TINY_RL.replace(loss=LossConfig(clip_high=0.3))
    path = tmp_path / "rl.toml"
    cfg.to_toml(path)
    text = path.read_text()
    assert "[rl.loss]\nclip_high = 0.3\n" in text
    for key in ("clip_low", "dual_clip", "cispo_clip_mode", "aggregation", "norm_length", "advantage ="):
        assert key not in text, key
    back = RLConfig.from_toml(path)
    assert back.loss.clip_high == 0.3 and back.advantage is None
    assert back.loss == LossConfig(clip_high=0.3)
    TINY_RL.to_toml(path)  # no override: no [rl.loss] table
    assert "[rl.loss]" not in path.read_text()
    assert RLConfig.from_toml(path).loss == LossConfig()


def test_rl_toml_empty_loss_table_keeps_the_method_defaults(tmp_path):
    path = _write(tmp_path, "[rl]\nsteps = 3\n[rl.loss]\n")
    assert load_config(path).loss == LossConfig()


@pytest.mark.parametrize("key", ["clip_low", "clip_high", "dual_clip", "cispo_clip_mode", "aggregation", "norm_length"])
def test_rl_flat_loss_keys_are_refused_with_a_pointer_to_rl_loss(tmp_path, key):
    value = {"cispo_clip_mode": '"absolute"', "aggregation": '"token-mean"', "norm_length": "8"}.get(key, "3.0")
    path = _write(tmp_path, f"[rl]\nsteps = 3\n{key} = {value}\n")
    with pytest.raises(ValueError) as info:
        load_config(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(str(path)) and f"{key} moved under [rl.loss]" in msg
    with pytest.raises(ValueError, match=r"moved under \[rl\.loss\]"):
        RLConfig.from_dict({"steps": 3, key: 3.0})


def test_rl_loss_must_be_a_table(tmp_path):
    path = _write(tmp_path, "[rl]\nsteps = 3\nloss = 0.2\n")
    with pytest.raises(ValueError, match=r"loss must be a table \(\[rl\.loss\]\)"):
        load_config(path)
    with pytest.raises(ValueError, match="loss must be a LossConfig"):
        RLConfig(loss={"clip_high": 0.3})


def test_rl_loss_table_rejects_unknown_keys(tmp_path):
    path = _write(tmp_path, "[rl]\nsteps = 3\n[rl.loss]\nclip = 0.2\n")
    with pytest.raises(ValueError, match=r"\[rl\.loss\]: unknown key\(s\) 'clip'"):
        load_config(path)


def test_sft_toml_nested_tables(tmp_path):
    cfg = load_config(_write(tmp_path, SFT_TOML))
    assert isinstance(cfg, SFTConfig)
    assert cfg.name == "tiny" and cfg.steps == 5
    assert cfg.task == MultiSolutionTask(num_digits=2)
    assert cfg.model == ModelConfig(1, 2, 16)
    # unspecified keys take their defaults
    assert cfg.batch_size == SFTConfig().batch_size


def test_to_dict_nested_tables():
    d = TINY_SFT.to_dict()
    assert d["task"] == {"name": "multisolution", **{k: v for k, v in d["task"].items() if k != "name"}}
    assert d["task"]["num_digits"] == 2
    assert d["model"] == {"n_layer": 1, "n_head": 2, "n_embd": 16, "mlp_ratio": 4, "kind": "transformer"}
    assert d["optim"]["betas"] == [0.9, 0.999] and "betas" not in d
    assert SFTConfig.from_dict(d) == TINY_SFT


# --- structure errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (SFT_TOML.replace("steps = 5", "steps = 5\nstepz = 3"), "stepz"),
        (SFT_TOML.replace("num_digits = 2", "num_digits = 2\nnum_digitz = 3"), "num_digitz"),
        (SFT_TOML.replace("n_embd = 16", "n_embd = 16\nn_embed = 3"), "n_embed"),
        ('[rl]\nmethod = "grpo"\ngroup_sise = 4\n', "group_sise"),
    ],
    ids=["top-level", "task", "model", "rl"],
)
def test_unknown_key_rejected_by_name(tmp_path, text, needle):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=needle):
        load_config(path)


def test_unknown_task_name(tmp_path):
    path = _write(tmp_path, SFT_TOML.replace('name = "multisolution"', 'name = "sudoku"'))
    with pytest.raises(ValueError, match="sudoku"):
        load_config(path)


@pytest.mark.parametrize(
    "text",
    [
        "[sim]\nsteps = 3\n",
        SFT_TOML + '\n[rl]\nmethod = "grpo"\n',
        "",
        "steps = 3\n",
    ],
    ids=["sim-table", "two-tables", "empty", "no-table"],
)
def test_wrong_top_level_table(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"\[sft\] or \[rl\]"):
        load_config(path)


def test_from_toml_wants_its_own_table(tmp_path):
    sft_path = _write(tmp_path, SFT_TOML, "sft.toml")
    rl_path = tmp_path / "rl.toml"
    TINY_RL.to_toml(rl_path)
    with pytest.raises(ValueError, match=r"\[rl\]"):
        RLConfig.from_toml(sft_path)
    with pytest.raises(ValueError, match=r"\[sft\]"):
        SFTConfig.from_toml(rl_path)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ValueError, match="missing.toml"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="broken.toml"):
        load_config(_write(tmp_path, "[sft]\nsteps = \n", "broken.toml"))


def test_model_must_be_a_table(tmp_path):
    path = _write(tmp_path, '[sft]\nmodel = "big"\n')
    with pytest.raises(ValueError, match="model"):
        load_config(path)


# --- bad values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"steps": 0}, "steps"),
        ({"batch_size": True}, "batch_size"),
        ({"batch_size": 2.0}, "batch_size"),
        ({"lr": 0}, "lr"),
        ({"lr": -1}, "lr"),
        ({"lr": "a"}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"lr_schedule": "linear"}, "lr_schedule"),
        ({"betas": (0.9,)}, "betas"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"eval_split": "dev"}, "eval_split"),
        ({"name": ""}, "name"),
        ({"name": "a/b"}, "name"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"grad_clip": 0}, "grad_clip"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"checkpoint_every": 0}, "checkpoint_every"),
    ],
)
def test_sft_bad_value_names_field(changes, field):
    with pytest.raises(ValueError, match=field):
        _replace(TINY_SFT, changes)


def _replace(cfg, changes: dict):
    """``cfg`` with ``changes``, an optimiser setting's in its ``optim`` sub-config."""
    optim = {k: v for k, v in changes.items() if k in OPTIM_FIELDS}
    rest = {k: v for k, v in changes.items() if k not in OPTIM_FIELDS}
    return cfg.replace(**rest, **({"optim": cfg.optim.replace(**optim)} if optim else {}))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("steps = 0", "steps"),
        ("batch_size = true", "batch_size"),
        ("lr = 0", "lr"),
        ("lr = -1", "lr"),
        ('lr = "a"', "lr"),
        ('lr_schedule = "linear"', "lr_schedule"),
        ("betas = [0.9]", "betas"),
        ('eval_split = "dev"', "eval_split"),
        ('name = ""', "name"),
        ('name = "a/b"', "name"),
    ],
)
def test_sft_bad_toml_value_names_field(tmp_path, body, field):
    path = _write(tmp_path, f"[sft]\n{body}\n")
    with pytest.raises(ValueError, match=field) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_sft_bad_model_value_names_field():
    with pytest.raises(ValueError, match="n_embd"):
        SFTConfig.from_dict({"model": {"n_layer": 1, "n_head": 3, "n_embd": 16}})
    with pytest.raises(ValueError, match="n_layer"):
        SFTConfig.from_dict({"model": {"n_layer": 0}})


def test_sft_bad_task_value_names_field():
    with pytest.raises(ValueError, match="num_digits"):
        SFTConfig.from_dict({"task": {"name": "multisolution", "num_digits": 9}})
    with pytest.raises(ValueError, match="size"):
        SFTConfig.from_dict({"task": {"name": "maze", "size": 6}})


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"steps": 0}, "steps"),
        ({"lr": 0}, "lr"),
        ({"lr": -1}, "lr"),
        ({"lr": "a"}, "lr"),
        ({"lr_schedule": "linear"}, "lr_schedule"),
        ({"betas": (0.9,)}, "betas"),
        ({"eval_split": "dev"}, "eval_split"),
        ({"name": ""}, "name"),
        ({"name": "a/b"}, "name"),
        ({"method": "ppo"}, "method"),
        ({"gamma": -1}, "gamma"),
        ({"gamma": float("inf")}, "gamma"),
        ({"group_size": 0}, "group_size"),
        ({"prompts_per_step": 0}, "prompts_per_step"),
        ({"minibatches": 17}, "minibatches"),
        ({"minibatches": 0}, "minibatches"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"temperature": 0}, "temperature"),
        ({"rare_share": 1.0}, "rare_share"),
        ({"rare_share": 0}, "rare_share"),
        ({"advantage": "rank"}, "advantage"),
        ({"std_kind": "sample"}, "std_kind"),
        ({"dynamic_sampling": 1}, "dynamic_sampling"),
        ({"kl_coef": -0.1}, "kl_coef"),
        ({"entropy_coef": -0.1}, "entropy_coef"),
        ({"eval_samples": -1}, "eval_samples"),
        ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"max_refills": -1}, "max_refills"),
    ],
)
def test_rl_bad_value_names_field(changes, field):
    with pytest.raises(ValueError, match=field):
        _replace(TINY_RL, changes)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"clip_low": -0.1}, "clip_low"),
        ({"clip_high": -0.1}, "clip_high"),
        ({"dual_clip": 0.5}, "dual_clip"),
        ({"aggregation": "sum"}, "aggregation"),
        ({"cispo_clip_mode": "both"}, "cispo_clip_mode"),
        ({"norm_length": 0}, "norm_length"),
    ],
)
def test_rl_bad_loss_value_names_field(changes, field):
    with pytest.raises(ValueError, match=field):
        TINY_RL.replace(loss=LossConfig(**changes))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('method = "ppo"', "method"),
        ("gamma = -1", "gamma"),
        ("group_size = 0", "group_size"),
        ("prompts_per_step = 2\ngroup_size = 2\nminibatches = 5", "minibatches"),
        ("top_p = 0", "top_p"),
        ("temperature = 0", "temperature"),
        ("rare_share = 1.0", "rare_share"),
        ("[rl.loss]\nclip_low = -0.1", "clip_low"),
        ('[rl.loss]\naggregation = "sum"', "aggregation"),
    ],
)
def test_rl_bad_toml_value_names_field(tmp_path, body, field):
    path = _write(tmp_path, f"[rl]\n{body}\n")
    with pytest.raises(ValueError, match=field) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_minibatches_up_to_rollouts_per_step():
    assert TINY_RL.replace(minibatches=16).minibatches == 16
    with pytest.raises(ValueError, match="16"):
        TINY_RL.replace(minibatches=17)


def test_rl_has_no_task_table(tmp_path):
    path = _write(tmp_path, '[rl]\nsteps = 3\n[rl.task]\nname = "multisolution"\n')
    with pytest.raises(ValueError, match="task"):
        load_config(path)


# --- derived settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "mode"), [("grpo", "std"), ("dapo", "std"), ("cispo", "std"), ("drgrpo", "mean")])
def test_advantage_mode_of_method(method, mode):
    assert RLConfig(method=method).advantage_mode == mode


@pytest.mark.parametrize("method", ["grpo", "dapo", "cispo", "drgrpo"])
@pytest.mark.parametrize("advantage", ["none", "mean", "std"])
def test_explicit_advantage_wins(method, advantage):
    assert RLConfig(method=method, advantage=advantage).advantage_mode == advantage


def test_loss_table_overrides_the_method_defaults():
    assert RLConfig().loss == LossConfig()
    assert RLConfig().resolved_loss() == resolve_loss_config("grpo")
    loss = LossConfig(
        clip_low=0.1,
        clip_high=0.3,
        dual_clip=3.0,
        cispo_clip_mode="absolute",
        aggregation="seq-mean-token-mean",
        norm_length=12,
    )
    cfg = RLConfig(method="cispo", loss=loss)
    assert cfg.loss is loss
    assert cfg.resolved_loss() == loss  # every field set: nothing left to the method
    partial = RLConfig(method="dapo", loss=LossConfig(clip_high=0.3)).resolved_loss()
    assert partial == resolve_loss_config("dapo", clip_high=0.3)
    assert (partial.clip_low, partial.clip_high, partial.aggregation) == (0.2, 0.3, "token-mean")


# --- the optimiser sub-config ------------------------------------------------------------------


@pytest.mark.parametrize("table", ["sft", "rl"])
def test_the_layout_before_optim_is_refused_naming_the_new_table(tmp_path, table):
    body = SFT_TOML if table == "sft" else '[rl]\nmethod = "grpo"\n'
    path = tmp_path / "old.toml"
    path.write_text(body.replace(f"[{table}]\n", f"[{table}]\nlr = 0.002\nwarmup_steps = 3\n", 1))
    with pytest.raises(ConfigError, match=rf"lr, warmup_steps moved under \[{table}.optim\]"):
        load_config(path)
    path.write_text(body.replace(f"[{table}]\n", f'[{table}]\noptimizer = "sgd"\n', 1))
    with pytest.raises(ConfigError, match="optimizer is its kind"):
        load_config(path)


@pytest.mark.parametrize("cfg", [TINY_SFT, TINY_RL], ids=["sft", "rl"])
def test_a_run_folder_in_the_layout_before_optim_reads_as_the_same_config(tmp_path, cfg):
    """A run folder written before [optim] keeps its sealed config.toml: read_run_config reads it as the config
    it is, in either layout; a file with both layouts is refused."""
    cfg = _replace(cfg, {"lr": 2e-3, "warmup_steps": 3, "betas": (0.8, 0.95)})
    table = cfg._table
    flat = {k: v for k, v in cfg.to_dict().items() if k != "optim"}
    old = {FLAT_KEYS_BY_NEW[k]: v for k, v in cfg.to_dict()["optim"].items()}
    path = tmp_path / "config.toml"
    write_toml(path, {table: {**flat, **old}})
    assert read_run_config(path) == cfg
    cfg.to_toml(path)
    assert read_run_config(path) == cfg
    write_toml(path, {table: {**cfg.to_dict(), "lr": 1e-3}})
    with pytest.raises(ConfigError, match="both"):
        read_run_config(path)


def test_a_partial_optim_table_updates_the_loops_own_defaults(tmp_path):
    path = tmp_path / "sft.toml"
    path.write_text(SFT_TOML + "\n[sft.optim]\nlr = 0.002\n")
    sft = load_config(path)
    assert sft.optim == SFT_OPTIM.replace(lr=0.002)  # SFT's cosine schedule and warm-up kept
    path.write_text('[rl]\nmethod = "grpo"\n\n[rl.optim]\nkind = "sgd"\n')
    assert load_config(path).optim == OptimConfig(kind="sgd")
    path.write_text('[rl]\nmethod = "grpo"\n\n[rl.optim]\nlr = 0\n')
    with pytest.raises(ValueError, match="lr"):
        load_config(path)
