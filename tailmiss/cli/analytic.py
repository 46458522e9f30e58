"""``tailmiss analytic``: the closed forms of F-GRPO and BroRL."""

from __future__ import annotations

from typing import Annotated

import typer

from tailmiss.cli._common import JsonOpt, analytic_app, print_table


@analytic_app.command("tail-miss")
def tail_miss_cmd(
    mu_pos: Annotated[float, typer.Option(help="Probability that one rollout is correct.")],
    tau: Annotated[float, typer.Option(help="Mass of the rare-correct subset E (0 < tau < mu_pos).")],
    n: Annotated[list[int], typer.Option("-n", "--n", help="Group size; repeat for several.")],
    as_json: JsonOpt = False,
) -> None:
    """Lemma 3.1: probability that a group is active yet misses E, with the active probability."""
    from tailmiss import analytic

    miss = analytic.tail_miss_probability(mu_pos, tau, n)
    active = analytic.active_probability(mu_pos, n)
    rows = [[int(k), float(a), float(m)] for k, a, m in zip(n, active, miss)]
    print_table(f"Lemma 3.1, mu_pos={mu_pos:g}, tau={tau:g}", ["N", "active", "tail_miss"], rows, as_json)


@analytic_app.command("peak")
def peak_cmd(
    mu_pos: Annotated[float, typer.Option(help="Probability that one rollout is correct.")],
    rho: Annotated[float | None, typer.Option(help="tau / mu_pos (give rho or tau).")] = None,
    tau: Annotated[float | None, typer.Option(help="Rare-correct mass (give rho or tau).")] = None,
    n_max: Annotated[int, typer.Option(help="Largest group size searched.")] = 10**7,
    as_json: JsonOpt = False,
) -> None:
    """Exact integer argmax N* of Lemma 3.1 and the best power of two."""
    from tailmiss import analytic

    if (rho is None) == (tau is None):
        raise ValueError("give exactly one of --rho and --tau")
    if tau is None:
        if not 0 < rho < 1:
            raise ValueError(f"rho must lie in (0, 1), got {rho!r}")
        tau = rho * mu_pos
    n_star, peak = analytic.tail_miss_peak(mu_pos, tau, n_max=n_max)
    grid = [2**k for k in range(0, max(1, n_max).bit_length())]
    n_pow2, peak_pow2 = analytic.tail_miss_peak(mu_pos, tau, grid=grid)
    rows = [["integer", int(n_star), float(peak)], ["power of two", int(n_pow2), float(peak_pow2)]]
    print_table(f"Tail-miss peak, mu_pos={mu_pos:g}, tau={tau:g}", ["grid", "N*", "peak"], rows, as_json)


@analytic_app.command("pass-at-k")
def pass_at_k_cmd(
    n: Annotated[int, typer.Option("-n", help="Samples per problem.")],
    c: Annotated[int, typer.Option("-c", help="Correct samples.")],
    k: Annotated[list[int], typer.Option("-k", help="k; repeat for several.")],
    as_json: JsonOpt = False,
) -> None:
    """Unbiased pass@k estimate (Chen et al. 2021)."""
    from tailmiss import analytic

    values = analytic.pass_at_k(n, c, k)
    print_table(f"pass@k, n={n}, c={c}", ["k", "pass@k"], [[int(a), float(b)] for a, b in zip(k, values)], as_json)
