"""Answer one question greedily and show what the model felt at each token.

The smallest end-to-end use of the foundation (model source -> backend -> step decoder), and the
first thing ``make demo`` prints: surprisal and entropy are the raw signals Sleight of Word
aggregates, so seeing them per token on a clean answer is the baseline to read everything else by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rich.table import Table



@dataclass
class TokenStat:
    position: int
    token_id: int
    text: str
    surprisal: float  # -log p(token), nats
    entropy: float  # full-vocabulary entropy of the distribution it came from, nats
    entropy_top20: float  # top-20 renormalised entropy (the Sleight of Word paper's estimate)


def answer_token_stats(backend, question: str, *, max_new_tokens: int = 48) -> list[TokenStat]:
    """Greedy answer through our step decoder, one row, stopping at EOS or the budget."""
    decoder = backend.step_decoder(capacity=1)
    (rid,) = decoder.add_rows([backend.chat_ids([{"role": "user", "content": question}])])
    stats: list[TokenStat] = []
    for position in range(max_new_tokens):
        (res,) = decoder.step()
        stats.append(TokenStat(position, res.token, backend.tokenizer.decode([res.token]),
                               -res.logprob, res.entropy, res.entropy_topk))
        if res.is_eos:
            break
    decoder.release([rid])
    return stats


def token_table(stats: list[TokenStat], title: str) -> Table:
    table = Table(title=title)
    columns: list[tuple[str, Literal["left", "right"]]] = [("#", "right"), ("token", "left"), ("id", "right"), ("surprisal (nats)", "right"),
                         ("entropy (nats)", "right"), ("top-20 entropy", "right")]
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for s in stats:
        table.add_row(str(s.position), repr(s.text), str(s.token_id), f"{s.surprisal:.3f}", f"{s.entropy:.3f}",
                      f"{s.entropy_top20:.3f}")
    return table
