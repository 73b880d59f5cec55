"""Token-exact budget allocation for a context packet.

The allocator fills a budget section by section in priority order (by
default: system prompt, the newest turn, pinned messages, session state,
summary, long-term notes, recalled messages, older recent turns), keeping
every item that still fits. Counts are exact for the chosen encoding: each
trial is measured on the rendered result, so the final request never counts
more than ``max_tokens`` (``counter.count_messages(messages) <= max_tokens``).

Text sections (state, summary, notes, recalled) go into one system message
after the system prompt — one system message is what every chat template
accepts. Message sections (pinned, latest, recent) are kept verbatim in
conversation order, a tool group (an assistant ``tool_calls`` message and its
results) always whole. Each section's spend is reported, summing exactly to
the tokens used, so an inspector can draw the budget as a bar.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from memlane.context.summarizer import split_sentences
from memlane.context.window import message_tokens
from memlane.errors import InvalidInputError
from memlane.models import DEFAULT_PRIORITIES, JSON, SECTIONS, Message, check_priorities
from memlane.tokens import REPLY_PRIMING, TokenCounter

__all__ = [
    "CONTEXT_LAYOUT",
    "DEFAULT_CAPS",
    "DEFAULT_PRIORITIES",
    "SECTIONS",
    "Allocation",
    "Allocator",
    "BudgetReport",
    "Candidates",
    "TextBlock",
    "TextItem",
    "TextPart",
    "check_priorities",
]

log = logging.getLogger(__name__)

#: Where the text sections appear inside the system message (fixed, whatever the priority).
CONTEXT_LAYOUT: tuple[str, ...] = ("state", "summary", "notes", "recalled")
#: At most this share of the budget per section, so that e.g. a long recall
#: list cannot crowd out the conversation itself: together they leave at
#: least a quarter of the budget to the recent turns.
DEFAULT_CAPS: dict[str, float] = {
    "pinned": 0.20, "state": 0.10, "summary": 0.20, "notes": 0.10, "recalled": 0.15,
}

Group = list[Message]


@dataclass(slots=True)
class TextItem:
    """One droppable line of a text section."""

    text: str
    order: float = 0.0  # display position inside its part
    rank: float = 0.0  # preference: lower is tried first
    splittable: bool = False  # may be cut after any sentence to fit


@dataclass(slots=True)
class TextPart:
    title: str
    items: list[TextItem]
    bullet: str = "- "


@dataclass(slots=True)
class TextBlock:
    section: str
    title: str
    parts: list[TextPart]

    def items(self) -> list[tuple[TextPart, TextItem]]:
        pairs = [(p, i) for p in self.parts for i in p.items]
        return sorted(pairs, key=lambda pi: pi[1].rank)


@dataclass(slots=True)
class Candidates:
    """Everything that could go into the request, per section."""

    system_prompt: str | None = None
    latest: list[Group] = field(default_factory=list)  # the newest turn, oldest group first
    pinned: list[Group] = field(default_factory=list)  # in preference order
    #: Older recent turns, oldest first, each a list of groups: kept or dropped whole.
    recent: list[list[Group]] = field(default_factory=list)
    blocks: dict[str, TextBlock] = field(default_factory=dict)


@dataclass(slots=True)
class BudgetReport:
    """How a budget was spent. ``sum(sections.values()) == used``."""

    max_tokens: int
    used: int
    encoding: str
    priorities: tuple[str, ...]
    sections: dict[str, int] = field(default_factory=dict)
    included: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.max_tokens - self.used

    def to_dict(self) -> JSON:
        return {
            "max_tokens": self.max_tokens,
            "used": self.used,
            "free": self.free,
            "encoding": self.encoding,
            "priorities": list(self.priorities),
            "sections": dict(self.sections),
            "included": dict(self.included),
            "dropped": dict(self.dropped),
            "truncated": list(self.truncated),
        }


@dataclass(slots=True)
class Allocation:
    messages: list[Message]
    report: BudgetReport
    #: Ids of every stored message that made it.
    kept_ids: set[int] = field(default_factory=set)
    #: (section, group) for every message group that made it, in conversation order.
    placed: list[tuple[str, Group]] = field(default_factory=list)


def _key(group: Group) -> int:
    first = group[0]
    return first.id if first.id is not None else -id(first)


class Allocator:
    """Fills ``max_tokens`` from :class:`Candidates`; see the module docstring."""

    def __init__(
        self,
        candidates: Candidates,
        counter: TokenCounter,
        max_tokens: int,
        *,
        priorities: Sequence[str] | None = None,
        caps: Mapping[str, float] | None = None,
        use_cache: bool = True,
    ) -> None:
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInputError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        self.c = candidates
        self.counter = counter
        self.max_tokens = max_tokens
        self.priorities = check_priorities(priorities)
        self.caps = {k: int(v * max_tokens) for k, v in (DEFAULT_CAPS if caps is None else caps).items()}
        self.use_cache = use_cache
        self.prompt: str | None = None
        self.chosen: dict[int, str] = {}  # id(TextItem) -> text as included
        self.groups: dict[int, tuple[str, Group]] = {}
        self.sys_tokens = 0
        self.msg_tokens = 0
        self.spent: dict[str, int] = {}
        self.included: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.truncated: set[str] = set()
        self._costs: dict[int, int] = {}

    # ---------------------------------------------------------- measuring

    def total(self) -> int:
        return self.sys_tokens + self.msg_tokens + REPLY_PRIMING

    def _cost(self, msg: Message) -> int:
        found = self._costs.get(id(msg))
        if found is None:
            found = self._costs[id(msg)] = message_tokens(msg, self.counter, use_cache=self.use_cache)
        return found

    def group_cost(self, group: Group) -> int:
        return sum(self._cost(m) for m in group)

    def system_content(self, upto: str | None = None) -> str:
        """The system message text; with ``upto``, only the sections up to that one."""
        parts: list[str] = []
        if self.prompt:
            parts.append(self.prompt)
        if upto == "system":
            return "\n\n".join(parts)
        for section in CONTEXT_LAYOUT:
            block = self.c.blocks.get(section)
            if block is not None:
                text = self._render_block(block)
                if text:
                    parts.append(text)
            if section == upto:
                break
        return "\n\n".join(parts)

    def _render_block(self, block: TextBlock) -> str:
        lines: list[str] = []
        for part in block.parts:
            chosen = [(i.order, self.chosen[id(i)]) for i in part.items if id(i) in self.chosen]
            if not chosen:
                continue
            if part.title:
                lines.append(part.title)
            lines.extend(part.bullet + text for _, text in sorted(chosen, key=lambda oc: oc[0]))
        if not lines:
            return ""
        return "\n".join([block.title, *lines]) if block.title else "\n".join(lines)

    def _sys_cost(self, content: str) -> int:
        if not content:
            return 0
        return self.counter.count_message(Message(role="system", content=content))

    def _fits(self, section: str, extra: int) -> bool:
        cap = self.caps.get(section)
        if cap is not None and self.spent.get(section, 0) + extra > cap:
            return False
        return self.total() + extra <= self.max_tokens

    def _count(self, table: dict[str, int], section: str, n: int = 1) -> None:
        table[section] = table.get(section, 0) + n

    # ------------------------------------------------------------ trying

    def try_text(self, section: str, item: TextItem) -> bool:
        """Include ``item`` (cut after a sentence if it is splittable and too long)."""
        self.chosen[id(item)] = item.text
        cost = self._sys_cost(self.system_content()) - self.sys_tokens
        if self._fits(section, cost):
            self._accept_text(section, cost)
            return True
        if item.splittable:
            cut = self._cut(section, item)
            if cut is not None:
                self.chosen[id(item)] = cut
                cost = self._sys_cost(self.system_content()) - self.sys_tokens
                self._accept_text(section, cost)
                self.truncated.add(section)
                return True
        del self.chosen[id(item)]
        self._count(self.dropped, section)
        return False

    def _cut(self, section: str, item: TextItem) -> str | None:
        """Whole sentences if any fit; else the first sentence cut after a word."""
        sentences = split_sentences(item.text)
        cut = self._longest_prefix(section, item, [" ".join(sentences[:k]) for k in range(1, len(sentences))])
        if cut is None:
            words = item.text.split()
            cut = self._longest_prefix(
                section, item, [" ".join(words[:k]) + "…" for k in range(1, len(words))]
            )
        return cut

    def _longest_prefix(self, section: str, item: TextItem, prefixes: Sequence[str]) -> str | None:
        """The longest of ``prefixes`` (growing) that fits, by bisection; None if none does."""
        lo, hi, best = 0, len(prefixes) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            self.chosen[id(item)] = prefixes[mid]
            cost = self._sys_cost(self.system_content()) - self.sys_tokens
            if self._fits(section, cost):
                best, lo = prefixes[mid], mid + 1
            else:
                hi = mid - 1
        return best

    def _accept_text(self, section: str, cost: int) -> None:
        self.sys_tokens += cost
        self.spent[section] = self.spent.get(section, 0) + cost
        self._count(self.included, section)

    def try_group(self, section: str, group: Group) -> bool:
        key = _key(group)
        if key in self.groups:
            return True  # already in (a pinned message that is also recent)
        cost = self.group_cost(group)
        if not self._fits(section, cost):
            self._count(self.dropped, section)
            return False
        self.groups[key] = (section, group)
        self.msg_tokens += cost
        self.spent[section] = self.spent.get(section, 0) + cost
        self._count(self.included, section)
        return True

    # ----------------------------------------------------------- sections

    def _system(self) -> None:
        prompt = self.c.system_prompt
        if not prompt:
            return
        self.prompt = prompt
        cost = self._sys_cost(self.system_content())
        # Leave the newest turn room (up to half the budget) before anything else.
        reserve = 0
        if "latest" in self.priorities and self.c.latest:
            reserve = min(sum(self.group_cost(g) for g in self.c.latest), self.max_tokens // 2)
        allowed = self.max_tokens - REPLY_PRIMING - reserve
        if cost > allowed:
            framing = self._sys_cost(" ") - self.counter.count(" ")
            self.prompt = self.counter.truncate(prompt, max(0, allowed - framing))
            cost = self._sys_cost(self.system_content())
            while self.prompt and cost > allowed:  # merges at the seam; rare
                self.prompt = self.counter.truncate(self.prompt, self.counter.count(self.prompt) - 1)
                cost = self._sys_cost(self.system_content())
            self.truncated.add("system")
            if not self.prompt:
                self.prompt = None
                self._count(self.dropped, "system")
                return
        self.sys_tokens = cost
        self.spent["system"] = cost
        self._count(self.included, "system")

    def _latest(self, groups: list[Group]) -> None:
        for i, group in enumerate(reversed(groups)):
            if self.try_group("latest", group):
                continue
            if i == 0:
                self._truncated_newest(group)
            self._count(self.dropped, "latest", len(groups) - i - 1)
            return

    def _truncated_newest(self, group: Group) -> None:
        """The newest message cut to the room left, when not even it fits whole."""
        msg = group[-1]
        trimmed = msg.with_(
            tool_calls=None, token_count=None, metadata={**msg.metadata, "truncated": True}
        )
        if trimmed.role == "tool":
            trimmed = trimmed.with_(role="user", tool_call_id=None)
        overhead = self.counter.count_message(trimmed.with_(content=""))
        room = self.max_tokens - self.total() - overhead
        if room <= 0:
            return
        cut = self.counter.truncate(msg.content, room)
        trimmed = trimmed.with_(content=cut)
        while cut and self.counter.count_message(trimmed) > room + overhead:
            cut = self.counter.truncate(cut, self.counter.count(cut) - 1)
            trimmed = trimmed.with_(content=cut)
        if not cut:
            return
        log.warning(
            "message %s exceeds the %d-token budget; sending it truncated", msg.id, self.max_tokens
        )
        if self.try_group("latest", [trimmed]):
            # It was counted as dropped a moment ago; it is in after all, cut.
            self.dropped["latest"] -= 1
            self.truncated.add("latest")
        else:
            self.dropped["latest"] -= 1  # the same message, counted once

    def _recent(self, turns: list[list[Group]]) -> None:
        # Whole turns, contiguous from the newest backwards: an answer without
        # its question, or a gap mid-conversation, makes the model misread it.
        for i, turn in enumerate(reversed(turns)):
            fresh = [g for g in turn if _key(g) not in self.groups]
            cost = sum(self.group_cost(g) for g in fresh)
            if not self._fits("recent", cost):
                self._count(self.dropped, "recent", len(turns) - i)
                return
            for group in fresh:
                self.try_group("recent", group)

    def run(self) -> Allocator:
        latest, recent = self.c.latest, self.c.recent
        if "latest" not in self.priorities and latest:
            recent, latest = [*recent, latest], []
        for section in self.priorities:
            if section == "system":
                self._system()
            elif section == "latest":
                self._latest(latest)
            elif section == "pinned":
                for group in self.c.pinned:
                    self.try_group("pinned", group)
            elif section == "recent":
                self._recent(recent)
            else:
                block = self.c.blocks.get(section)
                if block is not None:
                    for _part, item in block.items():
                        self.try_text(section, item)
        self._uncapped()
        return self

    def _uncapped(self) -> None:
        """Give room no section wanted back to the capped text sections, in priority order.

        Caps keep one section from crowding out the rest; once everything has had its
        turn they have done that, and a state or summary cut short while budget stays
        free would only lose what the agent needs (PRD-014: state before raw turns).
        """
        caps, self.caps = self.caps, {}
        try:
            for section in self.priorities:
                block = self.c.blocks.get(section)
                if block is None or self.total() >= self.max_tokens:
                    continue
                for _part, item in block.items():
                    shown = self.chosen.get(id(item))
                    if shown == item.text:
                        continue
                    if shown is None:  # dropped under the cap: one more try, counted once
                        self._count(self.dropped, section, -1)
                        self.try_text(section, item)
                        continue
                    # cut under the cap: whole if it fits now, else as long a cut as fits
                    self.chosen[id(item)] = item.text
                    cost = self._sys_cost(self.system_content()) - self.sys_tokens
                    if self._fits(section, cost):
                        self.truncated.discard(section)
                    else:
                        longer = self._cut(section, item)
                        self.chosen[id(item)] = shown if longer is None or len(longer) <= len(shown) else longer
                        cost = self._sys_cost(self.system_content()) - self.sys_tokens
                    self.sys_tokens += cost
                    self.spent[section] = self.spent.get(section, 0) + cost
        finally:
            self.caps = caps

    def remove_text(self, section: str, item: TextItem) -> None:
        """Take an included item out again (e.g. a recalled message that is also verbatim)."""
        if id(item) not in self.chosen:
            return
        del self.chosen[id(item)]
        cost = self._sys_cost(self.system_content())
        self.spent[section] = self.spent.get(section, 0) - (self.sys_tokens - cost)
        self.sys_tokens = cost
        self._count(self.included, section, -1)

    def fill(self, section: str, part: TextPart, items: Sequence[TextItem]) -> None:
        """Add ``items`` to ``part`` and include what fits in the room left (no caps)."""
        part.items.extend(items)
        caps, self.caps = self.caps, {}
        try:
            for item in sorted(items, key=lambda i: i.rank):
                self.try_text(section, item)
        finally:
            self.caps = caps

    # ------------------------------------------------------------ result

    def finish(self) -> Allocation:
        ordered = sorted(
            self.groups.values(),
            key=lambda sg: (sg[1][0].id if sg[1][0].id is not None else float("inf")),
        )
        content = self.system_content()
        messages: list[Message] = []
        if content:
            messages.append(Message(role="system", content=content))
        for _section, group in ordered:
            messages.extend(group)
        used = self.counter.count_messages(messages) if messages else 0
        if used > self.max_tokens:  # a stale cached count; never send an over-budget request
            log.error("budget allocation overshot (%d > %d); dropping older turns", used, self.max_tokens)
            while ordered and used > self.max_tokens:
                victim = next((sg for sg in ordered if sg[0] == "recent"), ordered[0])
                ordered.remove(victim)
                self.groups.pop(_key(victim[1]), None)
                messages = ([messages[0]] if content else []) + [m for _s, g in ordered for m in g]
                used = self.counter.count_messages(messages) if messages else 0
            if used > self.max_tokens:
                messages, used = [], 0
        report = BudgetReport(
            max_tokens=self.max_tokens, used=used, encoding=self.counter.name,
            priorities=tuple(self.priorities),
        )
        report.sections = self._breakdown(content, ordered) if messages else {}
        report.included = dict(self.included)
        report.dropped = {k: v for k, v in self.dropped.items() if v > 0}
        report.truncated = sorted(self.truncated)
        kept = {m.id for _s, g in ordered for m in g if m.id is not None}
        return Allocation(messages=messages, report=report, kept_ids=kept, placed=list(ordered))

    def _breakdown(self, content: str, ordered: list[tuple[str, Group]]) -> dict[str, int]:
        sections: dict[str, int] = {}
        if content:
            framing = self._sys_cost(content) - self.counter.count(content)
            sections["overhead"] = REPLY_PRIMING + framing
            previous = 0
            for section in ("system", *CONTEXT_LAYOUT):
                upto = self.counter.count(self.system_content(upto=section))
                if upto - previous:
                    sections[section] = upto - previous
                previous = upto
        else:
            sections["overhead"] = REPLY_PRIMING
        for section, group in ordered:
            spent = sum(self.counter.count_message(m) for m in group)
            sections[section] = sections.get(section, 0) + spent
        return sections
