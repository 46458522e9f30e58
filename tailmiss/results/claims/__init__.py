"""The paper's claims, computed once: each claim's numbers and its verdict as typed fields.

One home for every claim; the report (:mod:`tailmiss.report`) and the figures
(:mod:`tailmiss.figures`) only read these values, so no verdict is judged twice.

Modules
-------
theory
    Closed forms: Lemma 3.1 (Figs. 1(a), 3, 5), focal magnitudes (Fig. 4), App. N, Prop. 3.2, BroRL Thm. 1 / Cor. 3.
sim
    The categorical simulation: F-GRPO Fig. 2, BroRL Fig. 3.
llm
    The small transformer's sweeps: F-GRPO Tables 1, 2 and 4 in miniature.
bridge
    The simulation beside the transformer: do F-GRPO Fig. 2's regimes agree?
ladder
    The ladder from the simulator's policy to the transformer: N-shapes, matched-Q_pos retention, focal effects,
    one verdict per ingredient, the best simulator setting.
protocol
    F-GRPO Table 2 under its own protocol (Table 5), one ingredient per rung: checkpoint selection, verdicts on the
    dip, the ΔNLL_rare order and F-GRPO's reach.
rule
    The one rule for "beyond noise" (paired t by seed, else Welch; Holm within a family; a practical threshold δ per
    metric; identical runs are no evidence) and the one verdict vocabulary, used by every section and the ledger.
gamma
    F-GRPO Tables 6-7's γ sensitivity and Tables 12-14's pass@k curves on the paper's protocol.
controls
    F-GRPO Table 3's controls and Fig. 1(b,c)'s trade-off plane on the paper's protocol.
noise
    Could one seed show Table 2's dip? Seed spread of pass@256 scored exactly and the paper's way, single-seed
    probabilities, the App. Q test on same-config pairs.
"""

from __future__ import annotations

from tailmiss.results.claims.bridge import BRIDGE_SPEARMAN, BridgeVerdict, bridge_verdict
from tailmiss.results.claims.sim import BrorlClaims, Fig2Claims, brorl_claims, fig2_claims
from tailmiss.results.claims.theory import TheoryClaims, theory_claims

__all__ = [
    "BRIDGE_SPEARMAN",
    "TheoryClaims",
    "theory_claims",
    "Fig2Claims",
    "fig2_claims",
    "BrorlClaims",
    "brorl_claims",
    "BridgeVerdict",
    "bridge_verdict",
]
