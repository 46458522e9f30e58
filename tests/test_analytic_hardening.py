"""Hardening of :mod:`tailmiss.analytic`: hostile input, integer limits, shape errors, pass@k numerics, peak range.

The contract, for every public function and every argument: the call either returns finite numbers, or raises
``ValueError`` whose message names the argument. Never a NaN in the output, never a raw numpy/scipy/Python
error (TypeError, OverflowError, numpy's broadcasting message, ...), never a RuntimeWarning.

Decisions the tests pin down (see ``tailmiss/_checks.py``):

- booleans, strings, bytes, None, complex numbers, dicts, other objects and ragged lists are not numbers;
- NaN and +-inf are rejected everywhere: no argument has inf in its domain (group sizes must be whole numbers,
  ``eta`` lies in the open interval ``(0, inf)``, rewards, ``gamma`` and the logits must be finite);
- integer arguments (group sizes, counts) must be below ``2**53``, where float64 stops representing every
  integer; beyond it the old code wrapped around in int64 and answered e.g. 0.0 for a probability ~1;
- empty batches are valid and give empty results; an empty action axis is not.
"""

from __future__ import annotations

import importlib
import math
import re
import time
import tracemalloc
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tailmiss import _checks
from tailmiss import analytic as an

pass_at_k_module = importlib.import_module("tailmiss.analytic.pass_at_k")

# ---------------------------------------------------------------------------
# The table: every public function with valid arguments and the kind of each argument
# ---------------------------------------------------------------------------

P3 = np.array([[0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]])  # batch of 3, V = 4
MASK = np.array([True, True, False, False])
SAMPLED = np.array([[True, False, True, False], [False, True, False, False], [True, True, True, False]])
MU3, TAU3 = [0.2, 0.5, 0.7], [0.01, 0.05, 0.1]

# kinds: "real"/"int" broadcast against the other (3,)-shaped arguments, "scalar_real"/"scalar_int" take one
# number, "probs" (..., V) distributions, "mask" boolean action masks, "sampled" a mask or draw counts, "grid"
# any-shaped group sizes, "choice" a string option
ONE_STEP = {"probs": P3, "correct": MASK, "sampled": SAMPLED, "r_c": [1, 1, 2.0], "r_w": [-1, 0, 0.0]}
ONE_STEP["eta"] = [0.1, 0.2, 0.3]
ONE_STEP_KINDS = {"probs": "probs", "correct": "mask", "sampled": "sampled", "r_c": "real", "r_w": "real"}
ONE_STEP_KINDS["eta"] = "real"

TABLE = {
    "active_probability": (an.active_probability, {"mu_pos": MU3, "n": [2, 8, 32]}, {"mu_pos": "real", "n": "int"}),
    "tail_miss_probability": (
        an.tail_miss_probability,
        {"mu_pos": MU3, "tau": TAU3, "n": [2, 8, 32]},
        {"mu_pos": "real", "tau": "real", "n": "int"},
    ),
    "tail_miss_peak": (
        an.tail_miss_peak,
        {"mu_pos": MU3, "tau": TAU3, "n_max": 512},
        {"mu_pos": "real", "tau": "real", "n_max": "scalar_int"},
    ),
    "tail_miss_peak[grid]": (
        an.tail_miss_peak,
        {"mu_pos": MU3, "tau": TAU3, "grid": 2 ** np.arange(10)},
        {"mu_pos": "real", "tau": "real", "grid": "grid"},
    ),
    "mass_balance": (an.mass_balance, ONE_STEP, ONE_STEP_KINDS),
    "unsampled_correct_change": (an.unsampled_correct_change, ONE_STEP, ONE_STEP_KINDS),
    "expected_unsampled_second_moment": (
        an.expected_unsampled_second_moment,
        {"probs": P3, "n": [0, 2, 8], "mask": MASK},
        {"probs": "probs", "n": "int", "mask": "mask"},
    ),
    "expected_unsampled_mass": (
        an.expected_unsampled_mass,
        {"probs": P3, "n": [0, 2, 8], "mask": MASK},
        {"probs": "probs", "n": "int", "mask": "mask"},
    ),
    "expected_unsampled_coupling": (
        an.expected_unsampled_coupling,
        {"probs": P3, "correct": MASK, "n": [0, 2, 8]},
        {"probs": "probs", "correct": "mask", "n": "int"},
    ),
    "expected_sampled_mass": (
        an.expected_sampled_mass,
        {"probs": P3, "correct": MASK, "n": [2, 4, 8], "k": [0, 1, 3]},
        {"probs": "probs", "correct": "mask", "n": "int", "k": "int"},
    ),
    "expected_batch_mood": (
        an.expected_batch_mood,
        {"probs": P3, "correct": MASK, "n": [2, 4, 8], "k": [0, 1, 3], "r_c": [1.0, 2.0, 1.0], "r_w": [-1, 0, 0]},
        {"probs": "probs", "correct": "mask", "n": "int", "k": "int", "r_c": "real", "r_w": "real"},
    ),
    "focal_weight": (
        an.focal_weight,
        {"mu_hat": [0.0, 0.5, 1.0], "gamma": [0.0, 0.5, 2.0]},
        {"mu_hat": "real", "gamma": "real"},
    ),
    "advantage_magnitudes": (
        an.advantage_magnitudes,
        {"mu_pos": MU3, "std": "bessel", "n": [2, 4, 8]},
        {"mu_pos": "real", "std": "choice", "n": "int"},
    ),
    "advantage_magnitudes[population]": (
        an.advantage_magnitudes,
        {"mu_pos": MU3, "std": "population", "n": [2, 4, 8]},
        {"mu_pos": "real", "std": "choice", "n": "int"},
    ),
    "lr_matched_scale": (an.lr_matched_scale, {"gamma": [0.0, 0.5, 2.0]}, {"gamma": "real"}),
    "pass_at_k": (
        an.pass_at_k,
        {"n": [10, 1024, 10**9], "c": [3, 10, 2000], "k": [2, 256, 2000]},
        {"n": "int", "c": "int", "k": "int"},
    ),
    "pass_at_k_from_mass": (
        an.pass_at_k_from_mass,
        {"q_pos": [0.0, 0.3, 1.0], "k": [1, 7, 10**6]},
        {"q_pos": "real", "k": "int"},
    ),
    "initial_distribution": (
        an.initial_distribution,
        {
            "num_actions": 64,
            "num_correct": 8,
            "init": "seeded",
            "anchor_logit": 5.0,
            "correct_logit": 3.0,
            "incorrect_logit": 0.0,
        },
        {
            "num_actions": "scalar_int",
            "num_correct": "scalar_int",
            "init": "choice",
            "anchor_logit": "scalar_real",
            "correct_logit": "scalar_real",
            "incorrect_logit": "scalar_real",
        },
    ),
}

# None means "not given" for these (the default)
OPTIONAL = {
    ("tail_miss_peak[grid]", "grid"),
    ("expected_unsampled_second_moment", "mask"),
    ("expected_unsampled_mass", "mask"),
    ("advantage_magnitudes[population]", "n"),
}
PAIRS = [(fn_id, arg) for fn_id, (_, _, kinds) in TABLE.items() for arg in kinds]
NUMERIC_PAIRS = [(f, a) for f, a in PAIRS if TABLE[f][2][a] != "choice"]
INTEGER_PAIRS = [(f, a) for f, a in PAIRS if TABLE[f][2][a] in ("int", "scalar_int", "grid")]


def test_table_covers_every_public_function():
    public = {name for name in an.__all__ if callable(getattr(an, name)) and not name[0].isupper()}
    assert {fn.__name__ for fn, _, _ in TABLE.values()} == public
    for fn, kwargs, kinds in TABLE.values():
        assert set(kinds) == set(kwargs)
        assert_finite_result(fn(**kwargs))  # the valid arguments are valid


# ---------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------


def _leaves(result):
    if isinstance(result, tuple):  # the NamedTuple results
        for field in result:
            yield from _leaves(field)
    elif result is not None:
        yield result


def assert_finite_result(result) -> None:
    for leaf in _leaves(result):
        arr = np.asarray(leaf)
        if arr.dtype == bool:
            continue
        assert arr.dtype.kind in "iuf", f"non-numeric output {leaf!r}"
        assert np.all(np.isfinite(arr)), f"non-finite output {leaf!r}"


def names(arg: str) -> re.Pattern:
    return re.compile(rf"(?<![A-Za-z_]){re.escape(arg)}(?![A-Za-z_])")


def call_with(fn_id: str, arg: str, value):
    fn, kwargs, _ = TABLE[fn_id]
    return fn(**{**kwargs, arg: value})


def check_contract(fn_id: str, arg: str, value) -> str:
    """Finite result or a ValueError naming ``arg``; return which happened."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            result = call_with(fn_id, arg, value)
        except ValueError as exc:
            assert names(arg).search(str(exc)), f"{fn_id}: error does not name {arg}: {exc}"
            assert "could not be broadcast" not in str(exc) and "shape mismatch" not in str(exc), str(exc)
            return "raised"
    assert_finite_result(result)
    return "ok"


def must_raise(fn_id: str, arg: str, value, pattern: str | None = None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError) as info:
            call_with(fn_id, arg, value)
    message = str(info.value)
    assert names(arg).search(message), f"{fn_id}: error does not name {arg}: {message}"
    if pattern is not None:
        assert re.search(pattern, message), message


# ---------------------------------------------------------------------------
# Explicit cases: (function, argument, bad value)
# ---------------------------------------------------------------------------

NOT_NUMBERS = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "None": None,
    "str-number": "1",
    "str": "abc",
    "bytes": b"1",
    "object": object(),
    "dict-empty": {},
    "dict": {"a": 1},
    "list-with-str": [1, "a"],
    "complex": 1 + 1j,
    "ragged": [[1], [1, 2]],
    "set": {1, 2},
    "too-large-for-float": 10**400,
    "datetime": np.datetime64("2020-01-01"),
    "nan-in-array": [0.5, math.nan, 0.5],
}
BOOLEANS = {
    "True": True,
    "False": False,
    "np.True_": np.True_,
    "bool-array": np.array([True, False, True]),
    "list-with-bool": [True, 2, 3],
}
NOT_INTEGERS = {
    "2.5": 2.5,
    "-1": -1,
    "2**53": 2**53,
    "2**63": 2**63,
    "2**64+2": 2**64 + 2,
    "-(2**63)-1": -(2**63) - 1,
    "1e20": 1e20,
    "uint64-2**63": np.uint64(2**63),
    "object-array-2**70": np.array([2, 2**70, 3], dtype=object),
}


def _cases(pairs, values):
    return [
        pytest.param(f, a, v, id=f"{f}-{a}-{name}")
        for f, a in pairs
        for name, v in values.items()
        if not (TABLE[f][2][a] in ("mask", "sampled") and name in BOOLEANS) and not ((f, a) in OPTIONAL and v is None)
    ]


@pytest.mark.parametrize(("fn_id", "arg", "value"), _cases(NUMERIC_PAIRS, {**NOT_NUMBERS, **BOOLEANS}))
def test_non_numbers_are_rejected_naming_the_argument(fn_id, arg, value):
    must_raise(fn_id, arg, value)


@pytest.mark.parametrize(("fn_id", "arg", "value"), _cases(INTEGER_PAIRS + [("mass_balance", "sampled")], NOT_INTEGERS))
def test_non_integers_and_unrepresentable_integers_are_rejected(fn_id, arg, value):
    must_raise(fn_id, arg, value)


NOT_MASK_PAIRS = [(f, a) for f, a in NUMERIC_PAIRS if TABLE[f][2][a] not in ("mask", "sampled")]  # bools are masks


@pytest.mark.parametrize(("fn_id", "arg"), NOT_MASK_PAIRS, ids=[f"{f}-{a}" for f, a in NOT_MASK_PAIRS])
@pytest.mark.parametrize("bool_value", [True, False, np.True_, np.array([True, False, True])], ids=repr)
def test_booleans_are_not_numbers(fn_id, arg, bool_value):
    must_raise(fn_id, arg, bool_value, r"not boolean")


CONTRACT_ONLY = {
    "0": 0,
    "1": 1,
    "-0.5": -0.5,
    "0.5": 0.5,
    "1.5": 1.5,
    "1e300": 1e300,
    "-1e300": -1e300,
    "max-float": 1.7976931348623157e308,
    "subnormal": 5e-324,
    "empty-list": [],
    "empty-array": np.zeros(0),
    "empty-2d": np.zeros((0, 4)),
    "2**53-1": 2**53 - 1,
    "float32": np.float32(0.5),
    "int8": np.int8(3),
    "Fraction": Fraction(1, 2),
    "Decimal": Decimal("0.25"),
    "shape-1x1": np.array([[0.5]]),
    "shape-3x1": np.array([[2], [3], [4]]),
}


def _too_big_to_allocate(fn_id: str, arg: str, value) -> bool:
    """A valid but huge ``num_actions`` would allocate gigabytes: not a validation question."""
    if (fn_id, arg) != ("initial_distribution", "num_actions"):
        return False
    try:
        arr = np.asarray(value)
        x = float(arr.item()) if arr.size == 1 and arr.dtype.kind in "iufO" else None
    except (TypeError, ValueError, OverflowError):
        return False
    return x is not None and 1e6 <= abs(x) < 2**53


@pytest.mark.parametrize(("fn_id", "arg", "value"), _cases(NUMERIC_PAIRS, CONTRACT_ONLY))
def test_edge_values_give_finite_results_or_named_errors(fn_id, arg, value):
    if _too_big_to_allocate(fn_id, arg, value):
        pytest.skip("valid, but a policy of 2**53 actions does not fit in memory")
    check_contract(fn_id, arg, value)


def _wrong_shape(fn_id: str, arg: str):
    kind, valid = TABLE[fn_id][2][arg], TABLE[fn_id][1][arg]
    if kind in ("real", "int"):
        return np.asarray(valid)[:2]  # (2,) against the other (3,) arguments
    if kind in ("scalar_int", "scalar_real"):
        return np.array([valid, valid])
    if kind == "probs":
        return P3[:2]
    if kind == "mask":
        return MASK[:3]
    if kind == "sampled":
        return SAMPLED[:2]
    return None  # grid (any shape) and choice


# a lone broadcast argument (lr_matched_scale's gamma) has nothing to clash with
SHAPE_PAIRS = [(f, a) for f, a in PAIRS if _wrong_shape(f, a) is not None and len(TABLE[f][1]) > 1]


@pytest.mark.parametrize(("fn_id", "arg"), SHAPE_PAIRS, ids=[f"{f}-{a}" for f, a in SHAPE_PAIRS])
def test_wrong_shapes_are_named(fn_id, arg):
    kind = TABLE[fn_id][2][arg]
    pattern = r"single number" if kind.startswith("scalar") else r"with shape .* do(es)? not broadcast"
    must_raise(fn_id, arg, _wrong_shape(fn_id, arg), pattern)


CHOICE_PAIRS = [(f, a) for f, a in PAIRS if TABLE[f][2][a] == "choice"]


@pytest.mark.parametrize(("fn_id", "arg"), CHOICE_PAIRS, ids=[f"{f}-{a}" for f, a in CHOICE_PAIRS])
@pytest.mark.parametrize(
    "value",
    [None, 1, True, "foo", "", ["bessel"], np.array(["zero", "zero"]), object(), {}],
    ids=["None", "1", "True", "foo", "empty", "list", "str-array", "object", "dict"],
)
def test_string_options_reject_everything_else(fn_id, arg, value):
    must_raise(fn_id, arg, value, r"must be one of '")


# ---------------------------------------------------------------------------
# Hypothesis: arbitrary junk in one argument at a time
# ---------------------------------------------------------------------------

SCALAR_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.binary(max_size=2),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10, 100),
    st.integers(2**53 - 2, 2**80),
    st.integers(-(2**80), -(2**53)),
    st.complex_numbers(max_magnitude=10),
    st.fractions(max_denominator=10),
)
ARRAY_JUNK = hnp.arrays(
    dtype=st.sampled_from(["bool", "int8", "int64", "uint64", "float16", "float32", "float64", "complex128", "U2"]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
JUNK = st.one_of(
    SCALAR_JUNK,
    ARRAY_JUNK,
    st.lists(SCALAR_JUNK, max_size=4),
    st.lists(st.lists(st.floats(0, 1), max_size=3), max_size=3),  # possibly ragged
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.just(object()),
)


@pytest.mark.parametrize("fn_id", list(TABLE))
@given(data=st.data())
def test_fuzz_one_argument(fn_id, data):
    arg = data.draw(st.sampled_from(sorted(TABLE[fn_id][2])), label="arg")
    value = data.draw(JUNK, label="value")
    assume(not _too_big_to_allocate(fn_id, arg, value))
    assume(not ((fn_id, arg) in OPTIONAL and value is None))
    check_contract(fn_id, arg, value)


@st.composite
def valid_integers(draw):
    """Integers across the whole accepted range, in the forms callers use."""
    v = draw(st.one_of(st.integers(2, 1000), st.integers(2, 2**53 - 1)))
    form = draw(st.sampled_from(["int", "float", "int64", "uint64", "object-array"]))
    if form == "float":
        assume(float(v) == v)
        return float(v)
    if form == "int64":
        return np.int64(v)
    if form == "uint64":
        return np.uint64(v)
    return np.array([v], dtype=object) if form == "object-array" else v


@given(n=valid_integers())
def test_valid_integers_up_to_the_limit_are_accepted_exactly(n):
    exact = int(np.asarray(n).ravel()[0])
    out = _checks.check_integer("n", n, 1)
    assert out.dtype == np.int64 and int(out.ravel()[0]) == exact
    # pass@1 = c / n: a wrapped or rounded n would show here
    assert np.ravel(an.pass_at_k(n, 1, 1))[0] == pytest.approx(1.0 / exact, rel=1e-15)


# ---------------------------------------------------------------------------
# Requirement 2: integers that float64 cannot represent (old code: int64 wrap-around, silent wrong answers)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2**53, 2**63, 2**64 + 2, 10**30, 1e20, np.uint64(2**63)], ids=repr)
def test_huge_group_sizes_are_rejected_not_wrapped(n):
    # old code: active_probability(0.5, 2**63) == 0.0 (the truth is 1 - 2**(1 - 2**63), i.e. 1.0)
    for call in (
        lambda: an.active_probability(0.5, n),
        lambda: an.tail_miss_probability(0.5, 1e-20, n),
        lambda: an.expected_unsampled_mass(P3, n),
        lambda: an.pass_at_k(n, 1, 1),
        lambda: an.pass_at_k_from_mass(0.5, n),
    ):
        with pytest.raises(ValueError, match=r"\b(n|k) must be below 2\*\*53 = 9007199254740992"):
            call()


def test_limit_message_repeats_the_exact_value():
    with pytest.raises(ValueError, match=r"got 18446744073709551618\b"):
        an.active_probability(0.5, 2**64 + 2)
    with pytest.raises(ValueError, match=r"num_actions must be below 2\*\*53"):
        an.initial_distribution(num_actions=2**64)
    with pytest.raises(ValueError, match=r"sampled must be below 2\*\*53"):  # old code: counts wrapped to < 0
        an.mass_balance(P3[0], MASK, np.array([2**70, 0, 0, 0], dtype=object))


def test_largest_accepted_group_size_gives_right_answers():
    n = 2**53 - 1
    assert an.active_probability(0.5, n) == 1.0
    assert an.pass_at_k(n, 1, 1) == pytest.approx(2.0**-53, rel=1e-15)
    assert an.pass_at_k(n, 3, 5) == pytest.approx(15.0 / n, rel=1e-12)
    assert an.tail_miss_probability(0.5, 1e-20, n) == pytest.approx(math.exp(n * math.log1p(-1e-20)), rel=1e-12)
    assert an.expected_unsampled_mass(np.array([1e-17, 1 - 1e-17]), n) == pytest.approx(
        1e-17 * math.exp(-n * 1e-17), rel=1e-12
    )


# ---------------------------------------------------------------------------
# Requirement 3: booleans (old code: True passed as N = 1)
# ---------------------------------------------------------------------------


def test_true_is_not_a_group_size():
    for call in (
        lambda: an.active_probability(0.5, True),
        lambda: an.pass_at_k(True, 1, 1),  # old code: 1.0
        lambda: an.advantage_magnitudes(0.5, std="bessel", n=np.array([True, True])),
        lambda: an.initial_distribution(num_actions=True),
    ):
        with pytest.raises(ValueError, match=r"not boolean"):
            call()
    with pytest.raises(ValueError, match=r"mu_pos must be numeric, not boolean"):
        an.active_probability(True, 3)  # old code: 0.0
    with pytest.raises(ValueError, match=r"anchor_logit must be numeric, not boolean"):
        an.initial_distribution(64, 8, anchor_logit=True)


def test_strings_are_not_parsed():
    # old code: mu_pos="0.5" silently became 0.5
    with pytest.raises(ValueError, match=r"mu_pos must be numeric, got the string '0\.5'"):
        an.active_probability("0.5", 2)
    # old code: a raw "could not convert string to float" that named no argument
    with pytest.raises(ValueError, match=r"anchor_logit must be numeric"):
        an.initial_distribution(64, 8, anchor_logit="x")


# ---------------------------------------------------------------------------
# Requirement 4: shapes that do not broadcast are reported by name
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: an.tail_miss_probability(0.5, [0.1, 0.2], [2, 3, 4]), "tau with shape (2,) and n with shape (3,)"),
        (lambda: an.tail_miss_probability([0.5] * 3, [0.1, 0.2], 3), "mu_pos with shape (3,) and tau with shape (2,)"),
        (lambda: an.active_probability([0.1, 0.2, 0.3], [2, 3]), "mu_pos with shape (3,) and n with shape (2,)"),
        (lambda: an.pass_at_k([10, 20], [1, 2, 3], 1), "n with shape (2,) and c with shape (3,)"),
        (lambda: an.pass_at_k(10, [1, 2], [1, 2, 3]), "c with shape (2,) and k with shape (3,)"),
        (lambda: an.pass_at_k_from_mass([0.1, 0.2], [1, 2, 3]), "q_pos with shape (2,) and k with shape (3,)"),
        (lambda: an.focal_weight([0.1, 0.2], [1, 2, 3]), "mu_hat with shape (2,) and gamma with shape (3,)"),
        (lambda: an.advantage_magnitudes([0.2, 0.5], "bessel", [2, 3, 4]), "mu_pos with shape (2,) and n with shape"),
        (lambda: an.expected_unsampled_mass(P3, [1, 2]), "probs (without its action axis) with shape (3,) and n"),
        (lambda: an.expected_sampled_mass(P3[0], MASK, [3, 4], [1, 2, 3]), "n with shape (2,) and k with shape (3,)"),
        (lambda: an.mass_balance(P3, MASK, SAMPLED, eta=[1.0, 2.0]), "with shape (3,) and eta with shape (2,)"),
        (lambda: an.mass_balance(P3, MASK, SAMPLED, r_c=[1.0, 2.0]), "with shape (3,) and r_c with shape (2,)"),
        (lambda: an.mass_balance(P3, MASK, SAMPLED[:2]), "probs with shape (3, 4) and sampled with shape (2, 4)"),
        (lambda: an.expected_batch_mood(P3, MASK, 3, 1, r_c=[1.0, 2.0]), "with shape (3,) and r_c with shape (2,)"),
        (lambda: an.tail_miss_peak([0.5, 0.6], [0.1, 0.2, 0.3]), "mu_pos with shape (2,) and tau with shape (3,)"),
    ],
)
def test_broadcast_errors_name_arguments_and_shapes(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert message in str(info.value) and "do not broadcast" in str(info.value)
    assert "could not be broadcast" not in str(info.value) and "shape mismatch" not in str(info.value)


def test_broadcast_helper_finds_the_clashing_pair():
    assert _checks.broadcast_shapes_named(("a", (3, 1)), ("b", (4,)), ("c", ())) == (3, 4)
    with pytest.raises(ValueError, match=r"^b with shape \(4,\) and c with shape \(2, 1, 3\) do not broadcast$"):
        _checks.broadcast_shapes_named(("a", (1,)), ("b", (4,)), ("c", (2, 1, 3)))
    x, y = _checks.broadcast_named(("x", np.arange(3)), ("y", np.ones((2, 1))))
    assert x.shape == y.shape == (2, 3)


# ---------------------------------------------------------------------------
# Other silent failures found by the fuzzing
# ---------------------------------------------------------------------------


def test_non_finite_rewards_and_logits_are_rejected():
    # old code: NaN outputs
    with pytest.raises(ValueError, match=r"r_c must be finite, got inf"):
        an.mass_balance(P3, MASK, SAMPLED, r_c=math.inf)
    with pytest.raises(ValueError, match=r"r_w must be finite, got -inf"):
        an.expected_batch_mood(P3, MASK, 3, 1, r_w=-math.inf)
    with pytest.raises(ValueError, match=r"anchor_logit must not be NaN"):
        an.initial_distribution(64, 8, anchor_logit=math.nan)
    with pytest.raises(ValueError, match=r"incorrect_logit must be finite"):
        an.initial_distribution(64, 8, incorrect_logit=math.inf)


def test_huge_rewards_and_eta_do_not_overflow_in_intermediates():
    # every output is linear in (eta * rewards); s_r is linear in the rewards alone
    base = an.mass_balance(P3, MASK, SAMPLED)
    big = an.mass_balance(P3, MASK, SAMPLED, r_c=2.0**1000, r_w=-(2.0**1000), eta=2.0**-1000)
    for field in ("sampled_correct", "sampled_incorrect", "unsampled", "delta_q_pos"):
        np.testing.assert_allclose(getattr(big, field), getattr(base, field), rtol=1e-14)
    np.testing.assert_allclose(big.s_r, base.s_r * 2.0**1000, rtol=1e-14)
    out = an.unsampled_correct_change(P3, MASK, SAMPLED, eta=1.7e308)  # old code: eta * S_R overflowed to inf
    assert_finite_result(out)
    with pytest.raises(ValueError, match=r"eta, r_c and r_w are too large"):
        an.mass_balance(P3, MASK, SAMPLED, r_c=1e300, eta=1e300)  # the result itself is ~1e599


def test_tiny_success_rate_does_not_overflow_the_advantage():
    adv = an.advantage_magnitudes(5e-324)  # old code: (1 - mu) / mu overflowed to inf
    assert adv.positive == pytest.approx(1.0 / math.sqrt(5e-324), rel=1e-15)


def test_expected_sampled_mass_with_a_massless_class():
    # old code: 0/0 = NaN for a correct class without mass
    res = an.expected_sampled_mass(np.array([0.0, 1.0]), np.array([True, False]), 3, 1)
    assert res.p_pos == 0.0 and res.p_neg == 1.0
    # probs may sum to 1 within 1e-6; old code took Q_neg = 1 - Q_pos = -5e-7 and returned a negative mass
    res = an.expected_sampled_mass(np.array([1.0000005, 1e-7]), np.array([True, False]), 3, 0)
    assert res.p_neg == pytest.approx(1e-7, rel=1e-12)


def test_string_options_given_arrays():
    # old code: numpy's "truth value of an array is ambiguous"
    with pytest.raises(ValueError, match=r"std must be one of 'population', 'bessel'"):
        an.advantage_magnitudes(0.5, std=np.array(["bessel", "bessel"]))
    with pytest.raises(ValueError, match=r"init must be one of 'seeded', 'zero'"):
        an.initial_distribution(64, 8, init=np.array(["zero", "zero"]))


def test_scalar_arguments_reject_arrays():
    with pytest.raises(ValueError, match=r"n_max must be a single number"):
        an.tail_miss_peak(0.5, 0.1, n_max=[10, 20])  # old code: TypeError from int()
    with pytest.raises(ValueError, match=r"num_correct must be a single number"):
        an.initial_distribution(64, [8, 9])


def test_empty_batches_give_empty_results():
    e = np.zeros(0)
    assert an.active_probability(e, 3).shape == (0,)
    assert an.tail_miss_probability(e, e, e.astype(int) + 1).shape == (0,)
    peak = an.tail_miss_peak(e, e)
    assert peak.n_star.shape == peak.peak.shape == (0,)
    assert an.pass_at_k(e, e, e).shape == (0,)
    assert an.pass_at_k_from_mass(e, 3).shape == (0,)
    assert an.focal_weight(e, 0.5).shape == (0,)
    assert an.lr_matched_scale(e).shape == (0,)
    assert an.advantage_magnitudes(e, n=e).positive.shape == (0,)
    empty_probs = np.zeros((0, 4))
    assert an.expected_unsampled_mass(empty_probs, 3).shape == (0,)
    assert an.mass_balance(empty_probs, MASK, MASK).delta_q_pos.shape == (0,)
    with pytest.raises(ValueError, match=r"probs must have a non-empty last \(action\) axis"):
        an.expected_unsampled_mass(np.zeros((3, 0)), 3)
    with pytest.raises(ValueError, match=r"grid must hold at least one group size"):
        an.tail_miss_peak(0.5, 0.1, grid=[])  # old code: numpy's "attempt to get argmax of an empty sequence"


# ---------------------------------------------------------------------------
# Requirement 7: advantage_magnitudes validates n in population mode too
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 0, -3, 2.5, "x", True, math.nan, 2**64], ids=repr)
def test_advantage_population_mode_validates_n(n):
    # old code: any n was ignored unless std="bessel"
    with pytest.raises(ValueError, match=r"(?<![A-Za-z_])n(?![A-Za-z_])"):
        an.advantage_magnitudes(0.5, std="population", n=n)


def test_advantage_population_mode_broadcasts_n():
    out = an.advantage_magnitudes(0.25, n=[4, 8, 16])
    np.testing.assert_allclose(out.positive, [math.sqrt(3)] * 3, rtol=1e-15)
    assert an.advantage_magnitudes(0.25).positive == pytest.approx(math.sqrt(3), rel=1e-15)
    with pytest.raises(ValueError, match=r"mu_pos with shape \(2,\) and n with shape \(3,\)"):
        an.advantage_magnitudes([0.25, 0.5], n=[4, 8, 16])


# ---------------------------------------------------------------------------
# Requirement 6: tail_miss_peak refuses to return the end of its range
# ---------------------------------------------------------------------------


def test_peak_beyond_n_max_raises():
    # mu_pos = 1 - 1e-9, tau = 1e-15: Pr(B) still rises at N = 1e4 (the peak is near N = 1.4e10).
    # Old code: TailMissPeak(n_star=10000, peak=1.0e-5), the end of the range, without a word.
    with pytest.raises(ValueError, match=r"peak lies beyond n_max=10000; pass a larger n_max"):
        an.tail_miss_peak(1 - 1e-9, 1e-15, n_max=10**4)
    with pytest.raises(ValueError, match=r"peak lies beyond the largest grid value 8; extend grid"):
        an.tail_miss_peak(0.2, 0.002, grid=[1, 2, 4, 8])  # integer peak at 21


def test_peak_range_boundary():
    # mu = 0.5, rho = 0.01: the integer peak is N* = 8
    assert an.tail_miss_peak(0.5, 0.005, n_max=8).n_star == 8
    with pytest.raises(ValueError, match=r"n_max=7"):
        an.tail_miss_peak(0.5, 0.005, n_max=7)
    assert an.tail_miss_peak(0.5, 0.005, grid=[2, 4, 8]).n_star == 8
    assert an.tail_miss_peak(0.5, 0.005, grid=[2, 4, 9]).n_star == 9  # 9 is past the peak: no error
    # one element beyond its range is enough to raise, naming that element
    with pytest.raises(ValueError, match=r"mu_pos=0\.2"):
        an.tail_miss_peak([0.5, 0.2], [0.005, 0.002], n_max=10)
    assert an.tail_miss_peak(1.0, 0.3, n_max=1) == (1, 0.0)  # Pr = 0 for every N: nothing lies beyond


@given(mu=st.floats(0.01, 0.99), rho=st.floats(1e-4, 0.99), n_max=st.integers(1, 400))
def test_peak_result_is_the_global_maximum(mu, rho, n_max):
    tau = mu * rho
    assume(0.0 < tau < mu)
    brute = an.tail_miss_probability(mu, tau, np.arange(1, 4 * n_max + 2))
    try:
        res = an.tail_miss_peak(mu, tau, n_max=n_max)
    except ValueError:
        assert brute[n_max] > brute[:n_max].max()  # raised only when N = n_max + 1 beats the range
        return
    assert res.peak >= brute.max() * (1 - 1e-13)  # nothing beyond n_max (up to 4 n_max + 1) is higher


@given(mu=st.floats(1e-3, 1 - 1e-3), log_tau=st.floats(-12, -0.5))
def test_lemma31_is_log_concave_so_unimodal(mu, log_tau):
    """The docstring's argument for the range check: log Pr(B_N) is concave for N >= 2."""
    tau = min(10.0**log_tau, 0.9 * mu)
    log_vals = np.log(an.tail_miss_probability(mu, tau, np.arange(2, 600)))
    second = np.diff(log_vals, 2)
    assert np.all(second <= 1e-12 * (1 + np.abs(log_vals[1:-1])))


# ---------------------------------------------------------------------------
# Requirement 5: pass@k accurate, batch-independent, memory-bounded
# ---------------------------------------------------------------------------


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def rel_err(got: float, exact: Fraction) -> float:
    return float(abs(Fraction(got) - exact) / exact) if exact else abs(got)


def fsum_log_ratio(n: int, short: int, long: int) -> float:
    """Reference log(C(n-c,k)/C(n,k)): exact sum (math.fsum) of the ``short`` terms log(1 - long/(n-i)).

    Each term is within ~2 ulp (log1p of a correctly rounded small ratio, or the log of an exactly formed
    ratio near 0); all share one sign, so the reference is within ~2 ulp of the truth.
    """
    i = np.arange(short, dtype=np.float64)
    x = long / (n - i)
    return math.fsum(np.where(x <= 0.5, np.log1p(-np.minimum(x, 0.5)), np.log((n - i - long) / (n - i))))


@st.composite
def nck(draw, n_max=20_000):
    n = draw(st.integers(1, n_max))
    c = draw(st.one_of(st.integers(0, min(n, 40)), st.integers(0, n)))
    k = draw(st.one_of(st.integers(1, min(n, 40)), st.integers(1, n)))
    return n, c, k


@given(nck())
def test_pass_at_k_within_1e14_of_exact(args):
    assert rel_err(an.pass_at_k(*args), exact_pass_at_k(*args)) <= 1e-14


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [
        (10**9, 2000, 2000),  # old code: 0.0039920 alone, 0.0039992 inside a long batch
        (10**9, 1, 1),
        (10**9, 5000, 3),
        (10**12, 2000, 2000),
        (2**53 - 1, 700, 900),
        (10**5, 300, 7000),
        (10**5, 49_000, 51_000),  # d = n - c - k = 0: pass@k = 1 - 1/C(n, k), which rounds to 1
        (4000, 1999, 2000),
    ],
)
def test_pass_at_k_large_n_matches_exact_integers(n, c, k):
    assert rel_err(an.pass_at_k(n, c, k), exact_pass_at_k(n, c, k)) <= 1e-14


@pytest.mark.parametrize(("n", "k"), [(10**9, 10**6), (10**9, 10**8), (2**53 - 1, 10**7), (10**6, 999_999)])
def test_pass_at_k_single_correct_sample_is_k_over_n(n, k):
    # one correct sample among n: pass@k = k / n exactly (math.comb would be slow at these sizes)
    assert an.pass_at_k(n, 1, k) == pytest.approx(k / n, rel=1e-14)
    assert an.pass_at_k(n, k, 1) == pytest.approx(k / n, rel=1e-14)


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [
        (10**9, 10**5, 10**5),  # Stirling path (min(c, k) > 2**16)
        (10**9, 70_000, 300_000),
        (2**53 - 1, 10**5, 10**5),  # pass@k ~ 1.1e-6: relative accuracy of a small value
        (2**53 - 1, 10**6, 10**6),
        (10**15, 70_000, 70_000),
        (10**12, 10**5, 3 * 10**5),
        (10**7, 70_000, 70_000),
        (150_000, 70_000, 70_000),  # d = 10_000
    ],
)
def test_pass_at_k_long_products_match_log_space_sum(n, c, k):
    log_ratio = fsum_log_ratio(n, min(c, k), max(c, k))
    ref = -math.expm1(log_ratio)
    assert an.pass_at_k(n, c, k) == pytest.approx(ref, rel=1e-14)
    assert an.pass_at_k(n, k, c) == an.pass_at_k(n, c, k)  # C(n-c,k)/C(n,k) = C(n-k,c)/C(n,c)


@given(m=st.integers(1, 3000), small_n=st.booleans(), data=st.data())
def test_stirling_form_matches_exact_where_it_is_cheap_to_check(m, small_n, data):
    """The long-product formula checked against exact integers at sizes where math.comb is quick."""
    n = data.draw(st.integers(2 * m + 1, 20_000 if small_n else 10**12))
    assume(n >= 2 * m + 1)
    k = data.draw(st.integers(m, n - m - 1 if small_n else min(n - m - 1, m + 3000)))
    got = pass_at_k_module._log_ratio_stirling(np.array([float(n)]), np.array([float(m)]), np.array([float(k)]))[0]
    ratio = Fraction(math.comb(n - m, k), math.comb(n, k))
    if ratio > Fraction(1, 2):  # exact ratio - 1, then log1p: no cancellation
        assert got == pytest.approx(math.log1p(float(ratio - 1)), rel=1e-13)
    elif ratio > Fraction(1, 10**300):  # the correctly rounded ratio, then log
        assert got == pytest.approx(math.log(float(ratio)), rel=1e-13)
    else:  # below the doubles: logs of the exact integers (absolute error ~1e-16 * their size)
        assert got == pytest.approx(math.log(ratio.numerator) - math.log(ratio.denominator), rel=1e-12)


@given(
    batch=st.lists(
        st.tuples(st.integers(1, 10**12), st.integers(0, 200_000), st.integers(1, 200_000)),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_pass_at_k_each_element_is_independent_of_the_batch(batch, seed):
    rows = [(n, min(c, n), min(k, n)) for n, c, k in batch]
    n, c, k = (np.array(col) for col in zip(*rows, strict=True))
    order = np.random.default_rng(seed).permutation(len(rows))
    together = an.pass_at_k(n, c, k)
    shuffled = an.pass_at_k(n[order], c[order], k[order])
    padded = an.pass_at_k(np.r_[n, 10**9, 10**9], np.r_[c, 2000, 10**5], np.r_[k, 2000, 10**5])
    for i, row in enumerate(rows):
        alone = an.pass_at_k(*row)
        assert together[i] == alone and padded[i] == alone  # bit-identical
        assert shuffled[int(np.flatnonzero(order == i)[0])] == alone


def test_pass_at_k_old_switch_over_case():
    # more than 5e7 product terms in one call sent the old code to betaln for the whole batch:
    # 0.0039920 alone, 0.0039992 here (exact: 0.00399201862...)
    alone = an.pass_at_k(10**9, 2000, 2000)
    in_batch = an.pass_at_k([10**9, 10**12, 10**9], [2000, 5 * 10**7, 2000], [2000, 5 * 10**7, 2000])
    assert in_batch[0] == alone and in_batch[2] == alone
    assert rel_err(alone, exact_pass_at_k(10**9, 2000, 2000)) <= 1e-14
    assert an.pass_at_k(10**9, np.full(1000, 2000), 2000).tolist() == [alone] * 1000


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [
        (10**9, np.full(25, 2_000_000), 2_000_000),  # 5e7 terms: the old code built ~10 arrays of 5e7 entries
        (10**9, np.full(40, 65_536), 65_536),  # the longest products summed term by term
        (10**9, np.arange(1, 20_001), 500),  # many short products
    ],
    ids=["stirling", "direct-long", "direct-many"],
)
def test_pass_at_k_memory_is_bounded(n, c, k):
    tracemalloc.start()
    try:
        an.pass_at_k(n, c, k)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"peak {peak / 1e6:.1f} MB"


def test_pass_at_k_is_fast_for_long_products():
    start = time.perf_counter()
    an.pass_at_k(10**9, 2000, 2000)
    an.pass_at_k(10**9, 65_536, 65_536)  # the longest direct sum
    an.pass_at_k(10**9, 10**8, 10**8)  # Stirling
    assert time.perf_counter() - start < 1.0
