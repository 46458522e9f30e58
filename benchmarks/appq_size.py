"""The size of F-GRPO App. Q's paired subsampling test under its own null, for each form of the test.

    python benchmarks/appq_size.py [--nulls 2000] [--iterations 1000] [--problems 30 500] [--ks 1 16 256]
    python benchmarks/appq_size.py --problems 30 --exact-k1   # plus the k = 1 size without Monte-Carlo p-values

For each benchmark size P, the correct masses are a fixed draw of P problems from Beta(0.6, 0.4) (numpy seed
``--mass-seed``), the first tenth set to 0 and the next tenth to 1 (problems a policy never or always solves).
Each null draws two independent (P, n) outcome sets from those masses and runs
``tailmiss.analytic.significance.paired_subsampling_test`` on them (m of n, ``--iterations`` subsamples); every form and
every k is evaluated on the same draws (``tailmiss.analytic.significance_size.null_sizes``). Prints one row per
(form, k, P): the rejection rate, its 95 % Clopper-Pearson interval, and the wall time of that P's whole call
(shared by its rows: the subsample counts are drawn once per null for every form and k).

``--exact-k1`` also counts, on the same nulls, the rejections of the two scaled forms at k = 1 with the exact
subsampling p-value instead of the Monte-Carlo one: at k = 1 a subsample's difference is
sum_x (x10(x) - x01(x)) / (P m), with (x10, x01) of problem x multivariate hypergeometric (the m drawn indices
that are correct for A only and for B only), so its law is the convolution over problems of each problem's law
of x10 - x01 (costly for large P).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.special import gammaln

from tailmiss.analytic.significance import FORMS
from tailmiss.analytic.significance_size import NullSize, null_draw, null_sizes


def masses(problems: int, seed: int = 0) -> np.ndarray:
    """P masses from Beta(0.6, 0.4), the first tenth set to 0 and the next tenth to 1."""
    mu = np.random.default_rng(seed).beta(0.6, 0.4, problems)
    tenth = problems // 10
    mu[:tenth], mu[tenth : 2 * tenth] = 0.0, 1.0
    return mu


def _log_comb(a, b):
    return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)


def _difference_law(a_only: int, b_only: int, n: int, m: int) -> np.ndarray:
    """P(x10 - x01 = d) for d = -m..m: m of n indices without replacement, a_only of them A's, b_only B's."""
    i, j = np.arange(m + 1)[:, None], np.arange(m + 1)[None, :]
    rest = n - a_only - b_only
    ok = (i <= a_only) & (j <= b_only) & (i + j <= m) & (m - i - j <= rest)
    log_p = (
        _log_comb(a_only, np.minimum(i, a_only))
        + _log_comb(b_only, np.minimum(j, b_only))
        + _log_comb(rest, np.clip(m - i - j, 0, rest))
        - _log_comb(n, m)
    )
    law = np.zeros(2 * m + 1)
    np.add.at(law, (i - j + m)[ok], np.exp(log_p[ok]))
    return law


def exact_k1_rejections(mu, n: int, m: int, nulls: int, alpha: float, seed: int) -> dict[str, int]:
    """Rejections at k = 1 of the corrected and uncorrected forms, on null_sizes' nulls, by exact p-values."""
    problems, out = len(mu), {"corrected": 0, "uncorrected": 0}
    scales = {"corrected": math.sqrt(m * (n - 1) / (n - m)), "uncorrected": math.sqrt(m)}
    for index in range(nulls):
        a, b, _ = null_draw(mu, n, seed, index)
        a_only, b_only = (a & ~b).sum(1), (~a & b).sum(1)
        law, offset = np.ones(1), 0
        for x in np.flatnonzero(a_only + b_only):
            law, offset = np.convolve(law, _difference_law(a_only[x], b_only[x], n, m)), offset + m
        theta = (a_only.sum() - b_only.sum()) / (problems * n)
        stars = (np.arange(len(law)) - offset) / (problems * m)
        for form, tau in scales.items():
            p_value = law[np.abs(tau * (stars - theta)) >= math.sqrt(n) * abs(theta) - 1e-12].sum()
            out[form] += p_value < alpha
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nulls", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--problems", type=int, nargs="+", default=[30, 500])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 16, 256])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mass-seed", type=int, default=0)
    parser.add_argument("--exact-k1", action="store_true", help="also the k = 1 size with exact p-values")
    args = parser.parse_args()
    rows, exact = [], []
    for problems in args.problems:
        mu = masses(problems, args.mass_seed)
        print(
            f"P = {problems}: {int(np.sum(mu == 0))} masses at 0, {int(np.sum(mu == 1))} at 1, "
            f"mean {mu.mean():.3f}, {int(np.sum((mu > 0) & (mu < 0.03)))} in (0, 0.03)",
            flush=True,
        )
        start = time.perf_counter()
        sizes = null_sizes(mu, args.n, args.ks, args.m, args.nulls, args.iterations, args.alpha, FORMS, args.seed)
        seconds = time.perf_counter() - start
        rows += [(s, problems, seconds) for s in sizes]
        if args.exact_k1:
            start = time.perf_counter()
            counts = exact_k1_rejections(mu, args.n, args.m, args.nulls, args.alpha, args.seed)
            exact.append((problems, counts, time.perf_counter() - start))
    print(f"\nn = {args.n}, m = {args.m}, α = {args.alpha}, {args.iterations} subsamples per test, seed {args.seed}\n")
    print("| form | k | P | nulls | rejection rate | 95 % CI (Clopper-Pearson) | seconds |")
    print("|---|---|---|---|---|---|---|")
    for s, problems, seconds in sorted(rows, key=lambda r: (FORMS.index(r[0].form), r[0].k, r[1])):
        lo, hi = s.interval(0.95)
        print(f"| {s.form} | {s.k} | {problems} | {s.nulls} | {s.rate:.4f} | [{lo:.4f}, {hi:.4f}] | {seconds:.0f} |")
    for problems, counts, seconds in exact:
        for form, count in counts.items():
            lo, hi = NullSize(form, 1, args.m, args.n, problems, args.nulls, 0, args.alpha, int(count)).interval()
            rate, label = count / args.nulls, f"{form}, exact p"
            print(f"| {label} | 1 | {problems} | {args.nulls} | {rate:.4f} | [{lo:.4f}, {hi:.4f}] | {seconds:.0f} |")


if __name__ == "__main__":
    main()
