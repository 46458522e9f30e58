"""Config files that are wrong in kind, not just in range: types, non-finite floats, empty files, run names.

Every bad setting must give one ``ValueError`` line that names the key (and, for a file, the path) before
anything runs; see :func:`tailmiss.io.dataclass_from_mapping`, :class:`tailmiss.sim.SimConfig`,
:mod:`tailmiss.llm.config` and :func:`tailmiss.io.check_run_name`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from tailmiss.io import RUN_NAME_MAX_BYTES, check_run_name, dataclass_from_mapping
from tailmiss.llm import OptimConfig, RLConfig, SFTConfig, load_config
from tailmiss.objectives import LossConfig, group_advantages
from tailmiss.sim import SimConfig, simulate

F32_TINY = float(np.finfo(np.float32).tiny)
SMALL_SIM = {"num_actions": "6", "num_correct": "2", "group_sizes": "[2]", "gammas": "[0.0]", "steps": "2"}


def _write(tmp_path, text: str, name: str = "cfg.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _sim_text(body: str = "", **small) -> str:
    """A small ``[sim]`` file: SMALL_SIM (updated by ``small``) minus the keys that ``body`` sets, then ``body``."""
    keys = {line.split("=")[0].strip().removeprefix("[sim.").rstrip("]") for line in body.splitlines()}
    base = {**SMALL_SIM, **small}
    return "[sim]\n" + "".join(f"{k} = {v}\n" for k, v in base.items() if k not in keys) + body + "\n"


def _one_line_error(path, key: str, load) -> str:
    """Load ``body`` and return the message of the ValueError it must raise (one line, naming key and path)."""
    with pytest.raises(ValueError) as info:
        load(path)
    msg = str(info.value)
    assert key in msg, msg
    assert str(path) in msg, msg
    assert "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------------------
# Wrong types in TOML, simulator and LLM
# ---------------------------------------------------------------------------

SIM_TYPE_CASES = [
    ("name = 5", "name", "name must be a string, got 5"),
    ('reward_correct = "a"', "reward_correct", "reward_correct must be a number, got 'a'"),
    ('group_sizes = "2, 4"', "group_sizes", "group_sizes must be a list of integers, got '2, 4'"),
    ('betas = "0.9"', "betas", "betas must be a list of 2 numbers"),
    ('gammas = ["a", "b"]', "gammas", "gammas must be a list of numbers, got ['a', 'b']"),
    ('seeds = ["0"]', "seeds", "seeds must be a list of integers"),
    ('betas = ["a", "b"]', "betas", "betas must be a list of 2 numbers"),
    ('logits = ["a"]\ninit = "logits"', "logits", "logits must be a list of numbers"),
    ("lr = true", "lr", "lr must be a number, got True"),
    ("anchor_logit = false", "anchor_logit", "anchor_logit must be a number, got False"),
    ("steps = true", "steps", "steps must be an integer, got True"),
    ("group_sizes = [true, 2]", "group_sizes", "group_sizes must be a list of integers"),
    ("gammas = [false]", "gammas", "gammas must be a list of numbers"),
    ("steps = 2.0", "steps", "steps must be an integer, got 2.0"),
    ("lr = {value = 0.1}", "lr", "lr must be a number, got {'value': 0.1}"),
    ("[sim.lr]\nx = 1", "lr", "lr must be a number, got {'x': 1}"),
    ("group_sizes = {n = 2}", "group_sizes", "group_sizes must be a list of integers"),
    ("optimizer = 1", "optimizer", "optimizer must be a string, got 1"),
]


@pytest.mark.parametrize(("body", "key", "needle"), SIM_TYPE_CASES, ids=[c[0] for c in SIM_TYPE_CASES])
def test_sim_toml_wrong_type_names_key(tmp_path, body, key, needle):
    path = _write(tmp_path, _sim_text(body))
    assert needle in _one_line_error(path, key, SimConfig.from_toml)


SFT_TYPE_CASES = [
    ("name = 5", "name", "name must be a string, got 5"),
    ('[sft.optim]\nlr = "a"', "lr", "[sft.optim]: lr must be a number, got 'a'"),
    ('[sft.optim]\nbetas = "0.9, 0.99"', "betas", "betas must be a list of 2 numbers"),
    ('[sft.optim]\nbetas = ["a", "b"]', "betas", "betas must be a list of 2 numbers"),
    ("[sft.optim]\nlr = true", "lr", "lr must be a number, got True"),
    ("batch_size = false", "batch_size", "batch_size must be an integer, got False"),
    ("[sft.optim]\ngrad_clip = {x = 1}", "grad_clip", "grad_clip must be a number"),
    ('[sft.optim]\nkind = "adam"', "kind", "optimizer kind must be one of"),
    ("lr = 0.1", "lr", "lr moved under [sft.optim]"),
    ("[sft.model]\nn_layer = true", "n_layer", "n_layer must be an integer, got True"),
    ('[sft.model]\nn_embd = "64"', "n_embd", "n_embd must be an integer, got '64'"),
    ('[sft.task]\nname = "multisolution"\nmu_mean = "high"', "mu_mean", "mu_mean must be a number, got 'high'"),
    ('[sft.task]\nname = "maze"\nsize = 7.0', "size", "size must be an integer, got 7.0"),
]


@pytest.mark.parametrize(("body", "key", "needle"), SFT_TYPE_CASES, ids=[c[0] for c in SFT_TYPE_CASES])
def test_sft_toml_wrong_type_names_key(tmp_path, body, key, needle):
    text = f"[sft]\nsteps = 5\n{body}\n"
    path = _write(tmp_path, text)
    assert needle in _one_line_error(path, key, load_config)


RL_TYPE_CASES = [
    ("name = 5", "name", "name must be a string, got 5"),
    ('gamma = "a"', "gamma", "gamma must be a number, got 'a'"),
    ('method = ["grpo"]', "method", "method must be a string"),
    ('[rl.optim]\nbetas = "0.9"', "betas", "[rl.optim]: betas must be a list of 2 numbers"),
    ('[rl.optim]\nbetas = ["0.9", "0.99"]', "betas", "betas must be a list of 2 numbers"),
    ("group_size = true", "group_size", "group_size must be an integer, got True"),
    ("temperature = true", "temperature", "temperature must be a number, got True"),
    ("dynamic_sampling = 1", "dynamic_sampling", "dynamic_sampling must be true or false, got 1"),
    ('[rl.loss]\nclip_high = "0.28"', "clip_high", "[rl.loss]: clip_high must be a number, got '0.28'"),
    ("[rl.loss]\nnorm_length = 2.5", "norm_length", "[rl.loss]: norm_length must be an integer, got 2.5"),
    ('[rl.loss]\naggregation = ["token-mean"]', "aggregation", "[rl.loss]: aggregation must be a string"),
    ("[rl.optim]\nlr = {x = 1}", "lr", "[rl.optim]: lr must be a number"),
    ('optimizer = "sgd"', "optimizer", "optimizer moved under [rl.optim] (optimizer is its kind)"),
    ("[rl.kl_coef]\nx = 1", "kl_coef", "kl_coef must be a number"),
]


@pytest.mark.parametrize(("body", "key", "needle"), RL_TYPE_CASES, ids=[c[0] for c in RL_TYPE_CASES])
def test_rl_toml_wrong_type_names_key(tmp_path, body, key, needle):
    text = f"[rl]\nsteps = 5\n{body}\n"
    path = _write(tmp_path, text)
    assert needle in _one_line_error(path, key, load_config)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (_sim_text("num_correct = 7"), "num_correct"),
        (_sim_text("num_correct = 6"), "num_correct"),
        (_sim_text("group_sizes = [0]"), "group_sizes"),
        (_sim_text("group_sizes = [2, -4]"), "group_sizes"),
        (_sim_text("lr = 0"), "lr"),
        (_sim_text("lr = -0.1"), "lr"),
        ("[rl]\ngroup_size = 0\n", "group_size"),
        ("[rl]\ngroup_size = -2\n", "group_size"),
        ("[rl]\nlr = 0\n", "lr"),
        ("[rl]\nlr = -1e-4\n", "lr"),
        ("[sft]\nlr = 0.0\n", "lr"),
    ],
)
def test_impossible_values_name_key_and_path(tmp_path, text, key):
    path = _write(tmp_path, text)
    load = SimConfig.from_toml if text.startswith("[sim]") else load_config
    _one_line_error(path, key, load)


# ---------------------------------------------------------------------------
# Non-finite floats: rejected for every float setting
# ---------------------------------------------------------------------------

SIM_FLOATS = [
    f.name
    for f in dataclasses.fields(SimConfig)
    if f.type in ("float", "tuple[float, ...]", "tuple[float, float]")  # annotations are strings here
]


def test_sim_float_settings_are_all_listed():
    assert set(SIM_FLOATS) == {
        "anchor_logit",
        "correct_logit",
        "incorrect_logit",
        "logits",
        "reward_correct",
        "reward_incorrect",
        "adv_eps",
        "lr",
        "betas",
        "eps",
        "weight_decay",
        "gammas",
    }


def _sim_toml_value(key: str, bad: str) -> str:
    if key == "logits":
        return f'init = "logits"\nlogits = [0.0, 1.0, {bad}, 0.0, 0.0, 0.0]'
    if key == "betas":
        return f"betas = [0.9, {bad}]"
    if key == "gammas":
        return f"gammas = [0.0, {bad}]"
    return f"{key} = {bad}"


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("key", SIM_FLOATS)
def test_sim_toml_non_finite_rejected(tmp_path, key, bad):
    path = _write(tmp_path, _sim_text(_sim_toml_value(key, bad), advantage='"std"'))
    _one_line_error(path, key, SimConfig.from_toml)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, np.float64("nan"), np.float32("inf")])
@pytest.mark.parametrize("key", SIM_FLOATS)
def test_sim_python_non_finite_rejected(key, bad):
    base = SimConfig(num_actions=6, num_correct=2, group_sizes=(2,), gammas=(0.0,), steps=2, advantage="std")
    if key == "logits":
        changes = {"init": "logits", "logits": (0.0, 1.0, bad, 0.0, 0.0, 0.0)}
    elif key == "betas":
        changes = {"betas": (0.9, bad)}
    elif key == "gammas":
        changes = {"gammas": (0.0, bad)}
    else:
        changes = {key: bad}
    with pytest.raises(ValueError, match=key):
        base.replace(**changes)


@pytest.mark.parametrize(
    ("key", "value"), [("anchor_logit", 1e39), ("lr", 1e300), ("weight_decay", 4e38), ("incorrect_logit", -1e39)]
)
def test_sim_floats_must_be_finite_in_the_dtype(key, value):
    # finite in float64 but inf once the engine casts it to float32 logits / optimizer state
    with pytest.raises(ValueError, match=rf"{key} must be a finite number .*float32"):
        SimConfig(**{key: value})
    assert getattr(SimConfig(**{key: value}, dtype="float64"), key) == value


RL_FLOATS = [
    "gamma",
    "adv_eps",
    "kl_coef",
    "entropy_coef",
    "transform_coef",
    "temperature",
    "top_p",
    "rare_share",
]


RL_LOSS_FLOATS = ["clip_low", "clip_high", "dual_clip"]
OPTIM_FLOATS = ["lr", "weight_decay", "grad_clip"]


def test_rl_float_settings_are_all_listed():
    floats = {f.name for f in dataclasses.fields(RLConfig) if "float" in str(f.type)}
    assert floats == set(RL_FLOATS)
    assert {f.name for f in dataclasses.fields(OptimConfig) if "float" in str(f.type)} - {"betas"} == set(OPTIM_FLOATS)
    assert {f.name for f in dataclasses.fields(LossConfig) if "float" in str(f.type)} == set(RL_LOSS_FLOATS)


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("key", RL_LOSS_FLOATS)
def test_rl_loss_toml_non_finite_rejected(tmp_path, key, bad):
    path = _write(tmp_path, f"[rl]\nsteps = 5\n[rl.loss]\n{key} = {bad}\n")
    assert "[rl.loss]" in _one_line_error(path, key, load_config)


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("key", [*RL_FLOATS, *OPTIM_FLOATS, "betas"])
def test_rl_toml_non_finite_rejected(tmp_path, key, bad):
    line = f"betas = [0.9, {bad}]" if key == "betas" else f"{key} = {bad}"
    table = "[rl.optim]\n" if key in OPTIM_FLOATS or key == "betas" else ""
    path = _write(tmp_path, f"[rl]\nsteps = 5\n{table}{line}\n")
    assert "moved under" not in _one_line_error(path, key, load_config)


@pytest.mark.parametrize("bad", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("key", ["lr", "weight_decay", "grad_clip", "betas"])
def test_sft_toml_non_finite_rejected(tmp_path, key, bad):
    line = f"betas = [{bad}, 0.99]" if key == "betas" else f"{key} = {bad}"
    path = _write(tmp_path, f"[sft]\nsteps = 5\n[sft.optim]\n{line}\n")
    assert "[sft.optim]" in _one_line_error(path, key, load_config)


@pytest.mark.parametrize("bad", ["inf", "nan"])
@pytest.mark.parametrize(
    ("task", "key"),
    [
        ("multisolution", "mu_mean"),
        ("multisolution", "difficulty_concentration"),
        ("multisolution", "mu_min"),
        ("multisolution", "mu_max"),
        ("multisolution", "zipf_exponent"),
        ("multisolution", "heldout_fraction"),
        ("maze", "heldout_fraction"),
    ],
)
def test_sft_task_non_finite_rejected(tmp_path, task, key, bad):
    path = _write(tmp_path, f'[sft]\nsteps = 5\n[sft.task]\nname = "{task}"\n{key} = {bad}\n')
    _one_line_error(path, key, load_config)


@pytest.mark.parametrize(("key", "value"), [("lr", 1e300), ("kl_coef", 1e39), ("gamma", 5e38)])
def test_rl_floats_must_be_finite_in_float32(key, value):
    with pytest.raises(ValueError, match=rf"{key} must be a finite number .*float32"):
        OptimConfig(**{key: value}) if key == "lr" else RLConfig(**{key: value})


# ---------------------------------------------------------------------------
# Settings that passed validation and then crashed the run
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["eps", "adv_eps"])
def test_sim_epsilons_must_be_normal_in_the_dtype(key):
    # eps = 1e-50 becomes 0 in float32: Adam divided 0 by 0 and the sampler crashed on NaN probabilities
    with pytest.raises(ValueError, match=rf"{key} must be at least the smallest normal float32 number, 1.175e-38"):
        SimConfig(**{key: 1e-50})
    with pytest.raises(ValueError, match=rf"{key} must be at least the smallest normal float64"):
        SimConfig(**{key: 1e-310}, dtype="float64")
    assert getattr(SimConfig(**{key: 1e-50}, dtype="float64"), key) == 1e-50
    assert getattr(SimConfig(**{key: F32_TINY}), key) == F32_TINY


def test_sim_adv_eps_keeps_the_reward_gap_over_eps_finite():
    # an all-incorrect group has sigma = 0; the advantage a correct draw would get, 10 / 1.2e-38, is inf in float32
    small = {"num_actions": 6, "num_correct": 2, "advantage": "std", "reward_correct": 5.0, "reward_incorrect": -5.0}
    with pytest.raises(ValueError, match=r"adv_eps must be at least \(reward_correct - reward_incorrect\)"):
        SimConfig(**small, adv_eps=1.2e-38)
    assert SimConfig(**small, adv_eps=3e-38).adv_eps == 3e-38
    assert SimConfig(**small, adv_eps=1.2e-38, dtype="float64").adv_eps == 1.2e-38
    assert SimConfig(**{**small, "advantage": "mean"}, adv_eps=1.2e-38).adv_eps == 1.2e-38  # not read


def test_sim_rewards_bounded_so_squared_gradients_stay_finite():
    with pytest.raises(ValueError, match=r"reward_correct must lie within ±2.31e\+18 for dtype='float32'"):
        SimConfig(reward_correct=1e19)
    with pytest.raises(ValueError, match="reward_incorrect must lie within"):
        SimConfig(reward_incorrect=-1e30)
    assert SimConfig(reward_correct=1e30, reward_incorrect=-1e30, dtype="float64").reward_correct == 1e30


@pytest.mark.parametrize(
    "changes",
    [{"eps": F32_TINY}, {"advantage": "std", "adv_eps": F32_TINY}, {"reward_correct": 2e18, "reward_incorrect": -2e18}],
    ids=["eps", "adv_eps", "rewards"],
)
def test_sim_runs_at_the_accepted_bounds(changes):
    cfg = SimConfig(
        num_actions=6, num_correct=2, init="zero", group_sizes=(1, 2, 16), gammas=(0.0,), steps=10, log_every=1
    ).replace(**changes)
    history = simulate(cfg, device="cpu", progress=False).history
    before_last = history[history["step"] < cfg.steps]  # draw columns are NaN by design at the last step
    assert np.isfinite(before_last[["q_pos", "entropy", "mu_hat", "mb_unsampled"]].to_numpy()).all()


def test_rl_adv_eps_and_temperature_floors():
    with pytest.raises(ValueError, match="adv_eps must be at least the smallest normal float32 number"):
        RLConfig(adv_eps=1e-50)
    assert RLConfig(adv_eps=F32_TINY).adv_eps == F32_TINY
    with pytest.raises(ValueError, match=r"temperature must be a number in \[1e-30"):
        RLConfig(temperature=1e-320)
    assert RLConfig(temperature=1e-30).temperature == 1e-30


def test_rl_dynamic_sampling_needs_groups_of_two():
    # a group of one never has mixed rewards: every round would be dropped and the run would never train
    with pytest.raises(ValueError, match="dynamic_sampling needs group_size >= 2"):
        RLConfig(dynamic_sampling=True, group_size=1, advantage="none")
    assert RLConfig(dynamic_sampling=True, group_size=2).group_size == 2


def test_a_group_of_one_has_advantage_zero_and_the_trainer_refuses_it():
    """Our convention (verl's differs: mean 0, std 1, so the raw reward): R - mean(R) = 0 for a group of one."""
    rewards = torch.tensor([[1.0], [0.0]], dtype=torch.float64)
    for mode in ("mean", "std"):
        for std in ("bessel", "population"):  # 0, not 0/0
            assert (group_advantages(rewards, mode, std, F32_TINY) == 0).all()
    assert torch.equal(group_advantages(rewards, "none"), rewards)
    for method, mode in (("grpo", "std"), ("drgrpo", "mean"), ("cispo", "std")):
        with pytest.raises(ValueError, match=f"group_size=1 with advantage '{mode}' gives every rollout advantage 0"):
            RLConfig(method=method, group_size=1)
    assert RLConfig(group_size=1, advantage="none").group_size == 1  # raw rewards: a real signal


@pytest.mark.parametrize("key", RL_LOSS_FLOATS)
def test_rl_loss_overrides_must_be_finite(key):
    with pytest.raises(ValueError, match=key):
        LossConfig(**{key: math.inf})
    with pytest.raises(ValueError, match=rf"{key} must be a finite number .*float32"):  # finite in float64 only
        RLConfig(loss=LossConfig(**{key: 1e300}))


@pytest.mark.parametrize(("key", "value"), [("reward_correct", "a"), ("name", 5), ("lr", True), ("betas", (0.9, "x"))])
def test_sim_python_bad_type_is_a_value_error(key, value):
    # reward_correct = "a" used to raise TypeError from a comparison; name = 5 was accepted
    with pytest.raises(ValueError, match=key):
        SimConfig(**{key: value})


def test_sim_accepts_numpy_scalars_and_converts_them():
    cfg = SimConfig(
        num_actions=np.int64(6),
        num_correct=np.int32(2),
        lr=np.float32(0.5),
        reward_correct=np.float64(2.0),
        group_sizes=np.array([2, 4]),
        gammas=np.array([0.0, 1.0]),
        seeds=np.arange(2),
        betas=np.array([0.5, 0.9]),
    )
    assert type(cfg.num_actions) is int and type(cfg.lr) is float and type(cfg.reward_correct) is float
    assert cfg.group_sizes == (2, 4) and all(type(n) is int for n in cfg.group_sizes + cfg.seeds)
    assert all(type(b) is float for b in cfg.betas + cfg.gammas)
    assert SimConfig.from_dict(cfg.to_dict()) == cfg


# ---------------------------------------------------------------------------
# Files without settings
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "[sim]\n", "# only a comment\n[sim]\n"], ids=["empty", "empty-sim", "comment"])
def test_sim_file_without_settings(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"no settings") as info:
        SimConfig.from_toml(path)
    assert str(info.value).startswith(f"{path}: no settings")


@pytest.mark.parametrize("text", ["", "[rl]\n", "[sft]\n"], ids=["empty", "empty-rl", "empty-sft"])
def test_llm_file_without_settings(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"no settings") as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: no settings")


def test_llm_from_toml_without_settings(tmp_path):
    with pytest.raises(ValueError, match=r"no settings \(the \[rl\] table is empty\)"):
        RLConfig.from_toml(_write(tmp_path, "[rl]\n", "rl.toml"))
    with pytest.raises(ValueError, match=r"no settings \(the \[sft\] table is empty\)"):
        SFTConfig.from_toml(_write(tmp_path, "[sft]\n", "sft.toml"))
    # one setting is enough: a sub-table counts
    assert load_config(_write(tmp_path, '[sft]\n[sft.task]\nname = "maze"\n', "task.toml")).task.name == "maze"


# ---------------------------------------------------------------------------
# Run names: one folder under the cache root
# ---------------------------------------------------------------------------

BAD_NAMES = ["", ".", "..", ".hidden", "a/b", "../up", "a\\b", "a\x00b", "x" * (RUN_NAME_MAX_BYTES + 1), "é" * 51]


@pytest.mark.parametrize("name", BAD_NAMES, ids=range(len(BAD_NAMES)))
@pytest.mark.parametrize("cls", [SimConfig, SFTConfig, RLConfig])
def test_bad_run_names_rejected(cls, name):
    with pytest.raises(ValueError, match="name must name one folder"):
        cls(name=name)


@pytest.mark.parametrize("name", ["fgrpo-fig2", "a.b", "run_1", "名前", "x" * RUN_NAME_MAX_BYTES])
def test_good_run_names_accepted(name):
    check_run_name(name)
    assert SimConfig(name=name).name == RLConfig(name=name).name == name


# the TOML spelling of each name: a literal string keeps the backslash, a basic string spells NUL as \u0000
@pytest.mark.parametrize("value", ['".."', '"a/b"', "'a\\b'", '"a\\u0000b"', '".x"', '""'])
def test_bad_run_names_in_toml(tmp_path, value):
    sim = _write(tmp_path, f"[sim]\nname = {value}\n", "sim.toml")
    rl = _write(tmp_path, f"[rl]\nname = {value}\n", "rl.toml")
    for path, load in ((sim, SimConfig.from_toml), (rl, load_config)):
        with pytest.raises(ValueError, match="name must name one folder") as info:
            load(path)
        assert str(path) in str(info.value)


def test_check_run_name_uses_the_given_key():
    with pytest.raises(ValueError, match="^sweep name must be a string"):
        check_run_name(3, key="sweep name")


# ---------------------------------------------------------------------------
# The declarative check itself
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Typed:
    text: str = "a"
    count: int = 1
    ratio: float = 0.5
    flag: bool = False
    sizes: tuple[int, ...] = ()
    pair: tuple[float, float] = (0.0, 1.0)
    maybe: float | None = None
    anything: object = None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": 1}, "where: text must be a string, got 1"),
        ({"count": 1.5}, "where: count must be an integer, got 1.5"),
        ({"count": True}, "where: count must be an integer, got True"),
        ({"ratio": "0.5"}, "where: ratio must be a number, got '0.5'"),
        ({"ratio": False}, "where: ratio must be a number, got False"),
        ({"flag": 0}, "where: flag must be true or false, got 0"),
        ({"sizes": 3}, "where: sizes must be a list of integers, got 3"),
        ({"sizes": [1, 2.5]}, "where: sizes must be a list of integers, got [1, 2.5]"),
        ({"pair": [1.0]}, "where: pair must be a list of 2 numbers, got [1.0]"),
        ({"pair": [1.0, 2.0, 3.0]}, "where: pair must be a list of 2 numbers"),
        ({"maybe": "x"}, "where: maybe must be a number, got 'x'"),
        ({"sizes": [*range(100), "x"]}, "where: sizes must be a list of integers, got [0, 1, 2, 3, 4, 5, ...]"),
    ],
)
def test_dataclass_from_mapping_checks_annotations(data, message):
    with pytest.raises(ValueError) as info:
        dataclass_from_mapping(_Typed, data, "where")
    assert str(info.value).startswith(message)
    assert len(str(info.value)) < 200  # long lists are abbreviated


def test_dataclass_from_mapping_accepts_good_values():
    good = {
        "text": "b",
        "count": np.int64(3),
        "ratio": 2,  # an integer is a number
        "flag": True,
        "sizes": [1, 2],
        "pair": (0.5, 1),
        "maybe": None,
        "anything": {"any": "thing"},
    }
    assert dataclass_from_mapping(_Typed, good, "where").ratio == 2
    assert dataclass_from_mapping(_Typed, {"maybe": 0.25}).maybe == 0.25


def test_dataclass_from_mapping_wants_a_table():
    with pytest.raises(ValueError, match="where: expected a table, got"):
        dataclass_from_mapping(_Typed, [("text", "a")], "where")
