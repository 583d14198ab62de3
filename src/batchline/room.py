"""What a publisher knows of the room left in a bounded queue, so the bound holds exactly.

RabbitMQ (3.10 here) applies a quorum queue's `x-max-length` with `reject-publish` after the
fact: the queue tells its publishers it is full once a message has taken it past the bound,
and every message already on its way lands anyway. Publishes written together (a group of
256 Submits is one write) all land: against a bound of 500, a queue at 380 took a whole group
and held 636, and two publishers took it to 874. So the publisher keeps the bound itself
(`RabbitBroker.publish`): it counts what it wrote against the depth it last saw (a passive
declare), writes at once while a quarter of the bound stays free, and nearer the bound looks
again before each write and writes an eighth of the room left.

The estimate errs high only: it counts every message not yet confirmed when the look began
or written since, and never what consumers took since. With one publishing process the bound
is exact. Several see each other's messages only when they look, so each looks before others
could miss a sixteenth of the bound, and near it each takes an eighth of what it saw; against
a bound of 500, publishers writing groups all at once peaked at 501 (2 of them), 501-502
(4) and 520-530 (8).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class QueueRoom:
    bound: int
    chunk: int = 32  # near the bound, the most one write takes
    _depth: int = 0  # ready messages at the last look
    _counted: int = 0  # what `_confirmed` was when that look began: those are in `_depth`
    _written: int = 0  # messages written, less those refused or lost since
    _confirmed: int = 0  # of them, those RabbitMQ confirmed into the queue

    def looking(self) -> int:
        """A look begins: returns what `seen` must be given back with its answer."""
        return self._confirmed

    def seen(self, depth: int, mark: int) -> None:
        """A look that began at `mark` found `depth` ready messages."""
        self._depth, self._counted = depth, mark

    def written(self, n: int) -> None:
        self._written += n

    def settled(self, confirmed: int, refused: int) -> None:
        """Of what was written, `confirmed` went into the queue and `refused` never will
        (nacked, returned, lost with the channel)."""
        self._confirmed += confirmed
        self._written -= refused

    def estimate(self) -> int:
        """Ready messages at most: the depth seen, and what this publisher wrote that the look
        may not have counted."""
        return self._depth + self._written - self._counted

    def unseen(self) -> int:
        """What other publishers may not have seen of this one's writes."""
        return self._written - self._counted

    def must_look(self, n: int) -> bool:
        """Whether to look before writing `n` more: what others cannot see of this publisher's
        writes stays within a sixteenth of the bound."""
        return self.unseen() + n > self._unseen_limit()

    def may_look(self) -> bool:
        """Whether to look in the background, so a publish seldom waits for `must_look`."""
        return self.unseen() > self._unseen_limit() // 2

    def _unseen_limit(self) -> int:
        return max(1, self.bound // 16)

    def at_once(self, n: int) -> bool:
        """Whether `n` more can be written in one go: this publisher's unseen writes stay within
        a sixteenth of the bound and a quarter of it stays free, room for what four other
        publishers wrote that this one has not seen."""
        return not self.must_look(n) and self.estimate() + n <= self.bound - self.bound // 4

    def room(self) -> int:
        return max(0, self.bound - self.estimate())

    def fits(self) -> int:
        """After a fresh look: how many to write now, 0 when the queue is full. An eighth of
        the room left (at least one, at most `chunk`), so publishers near the bound together
        fill it in steps instead of each taking all of it."""
        room = self.room()
        return min(self.chunk, max(1, room // 8)) if room > 0 else 0
