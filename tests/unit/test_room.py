"""QueueRoom: the publisher's own count that keeps a bounded queue's bound exactly (the same
against the real RabbitMQ: tests/integration/test_rabbit.py)."""

from __future__ import annotations

from batchline.room import QueueRoom


def test_far_from_the_bound_a_write_goes_at_once_and_near_it_takes_an_eighth_of_the_room() -> None:
    room = QueueRoom(bound=1600, chunk=32)
    assert room.at_once(100)
    room.written(100)
    room.settled(confirmed=100, refused=0)
    room.seen(depth=1150, mark=room.looking())  # others filled it: 1,150 of 1,600
    assert room.estimate() == 1150 and not room.at_once(100)  # a quarter stays free: 1,200
    assert room.fits() == 32  # an eighth of 450, at most a chunk
    room.seen(depth=1560, mark=room.looking())
    assert room.fits() == 5  # an eighth of 40
    room.seen(depth=1599, mark=room.looking())
    assert room.fits() == 1
    room.seen(depth=1600, mark=room.looking())
    assert room.fits() == 0


def test_what_a_look_may_have_missed_stays_counted() -> None:
    room = QueueRoom(bound=1000)
    room.written(30)  # not confirmed when the look begins: it may not be in the depth it finds
    mark = room.looking()
    room.written(20)  # written while it looks
    room.settled(confirmed=50, refused=0)
    room.seen(depth=400, mark=mark)
    assert room.estimate() == 450  # all 50 counted again, never fewer
    room.seen(depth=400, mark=room.looking())  # a look after their confirms counts them itself
    assert room.estimate() == 400


def test_refused_and_lost_writes_give_their_places_back() -> None:
    room = QueueRoom(bound=100)
    room.written(10)
    room.settled(confirmed=4, refused=6)
    assert room.estimate() == 4


def test_a_publisher_looks_before_others_could_miss_a_sixteenth_of_the_bound() -> None:
    room = QueueRoom(bound=1600)  # a sixteenth: 100
    assert not room.must_look(100) and room.must_look(101)
    assert not room.at_once(101)  # a write too big for that goes near-full, a piece at a time
    room.written(60)
    assert room.may_look() and not room.must_look(40) and room.must_look(41)
    room.settled(confirmed=60, refused=0)
    room.seen(depth=60, mark=room.looking())
    assert room.unseen() == 0 and not room.may_look()
