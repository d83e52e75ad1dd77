"""The playback state and the repaint pace, without Textual: a fake cursor and a thread."""
import threading

from lineage.playback.player import Player, Throttle


class Cursor:
    def __init__(self, total):
        self.total, self.frames, self.closed = total, [], False

    def frame(self, i):
        while len(self.frames) <= i:
            self.frames.append(len(self.frames))
        return self.frames[i]

    def close(self):
        self.closed = True


def test_open_play_tick_stop():
    p = Player()
    assert not p.play()                               # nothing open
    first = Cursor(3)
    p.open(first)
    assert p.shown(first, 2) and p.index == 2
    assert p.play() and p.index == -1                 # at the end: play again from the start
    assert p.tick() == 0
    p.shown(first, 2)
    assert p.tick() is None                           # the end: the screen stops
    assert p.stop() and not p.stop()                  # True only when it was playing
    second = Cursor(5)
    p.open(second)
    assert first.closed and p.index == 0 and not p.shown(first, 1)    # a frame of the old file is dropped
    assert [p.clamp(i) for i in (-3, 2, 9)] == [0, 2, 4]


def test_speed_is_clamped():
    p = Player()
    p.change_speed(-1)
    assert p.speed == "1"
    for _ in range(10):
        p.change_speed(1)
    assert p.speed == "max"


def _max_worker(total, draws=10 ** 9):
    """A player playing at max speed over a fake cursor of `total` frames, its worker started,
    at most `draws` frames a second posted; (player, cursor, the steps posted, wait until a
    condition on them holds, the worker)."""
    p, cur = Player(), Cursor(total)
    p.MAX_DRAWS = draws
    p.open(cur)
    p.play()
    posted, got = [], threading.Condition()

    def post(i):
        with got:
            posted.append(i)
            got.notify_all()

    def until(ready, timeout):
        with got:
            return got.wait_for(ready, timeout)

    worker = threading.Thread(target=p.run_max, args=(cur, post, lambda: False), daemon=True)
    worker.start()
    return p, cur, posted, until, worker


def test_run_max_makes_every_frame_and_posts_the_newest_as_the_screen_is_ready():
    """The model sets the pace, not the repaints: with the screen drawing nothing, the worker
    still makes every frame, posts only the first, and the newest once the screen draws."""
    p, cur, posted, until, worker = _max_worker(100)
    assert until(lambda: posted == [1], 5)
    for _ in range(500):
        if len(cur.frames) == 100:
            break
        threading.Event().wait(0.01)
    assert len(cur.frames) == 100 and posted == [1]          # all made, one posted: none drawn yet
    p.shown(cur, 1)                                          # the screen draws it: the newest comes
    assert until(lambda: posted == [1, 99], 5)
    assert worker.is_alive()                                 # the last posted is waited for
    p.shown(cur, 99)
    worker.join(5)
    assert not worker.is_alive() and posted == [1, 99]


def _screen(p, cur, posted, until, worker):
    """A screen that draws whatever is posted at once, in its own thread."""
    def draw():
        while worker.is_alive() and p.playing:
            if until(lambda: posted and posted[-1] > p.index, 0.05):
                p.shown(cur, posted[-1])
    screen = threading.Thread(target=draw, daemon=True)
    screen.start()
    return screen


def test_run_max_posts_as_the_screen_keeps_up_and_ends_at_a_stop():
    p, cur, posted, until, worker = _max_worker(10 ** 7)
    screen = _screen(p, cur, posted, until, worker)
    assert until(lambda: len(posted) >= 20, 5)
    p.stop()
    worker.join(5)
    screen.join(5)
    assert not worker.is_alive() and posted == sorted(set(posted))   # newest first, never back


def test_run_max_draws_at_most_max_draws_a_second():
    """However fast the screen, max speed posts at most MAX_DRAWS frames a second: the rest of
    the time is the model's."""
    p, cur, posted, until, worker = _max_worker(10 ** 7, draws=20)
    screen = _screen(p, cur, posted, until, worker)
    threading.Event().wait(1.0)
    p.stop()
    worker.join(5)
    screen.join(5)
    assert 5 <= len(posted) <= 22, len(posted)


def test_throttle_holds_the_newest_while_playing():
    t = Throttle(0.5)
    assert t.offer("a", now=10.0, playing=True) is None           # the first draw goes through
    assert t.offer("b", now=10.1, playing=True) == 0.5            # held; release in 0.5 s
    assert t.offer("c", now=10.2, playing=True) == 0.0            # held instead of b; a release is due
    assert t.release(now=10.6) == ("c",) and t.release(now=10.7) is None
    assert t.offer("d", now=10.8, playing=True) == 0.5            # 0.2 s after the last draw
    assert t.offer("e", now=10.9, playing=False) is None          # by hand: at once, dropping d
    assert t.release(now=11.3) is None
    assert Throttle(0.0).offer("x", now=0.0, playing=True) is None   # no interval: every frame


def test_steps_count_from_the_target_and_a_slow_frame_sets_the_pace():
    p, cur = Player(), Cursor(10)
    p.open(cur)
    assert p.aim(3) == 3 and p.pending and p.aim(p.target + 1) == 4     # a press counts from the target
    assert p.aim(40) == 9 and p.aim(-2) == 0                          # clamped
    p.aim(4)
    p.give_up()                                                       # cancelled: back to what is shown
    assert p.target == p.index == 0 and not p.pending
    p.play()
    assert p.tick() == 1 and not p.pending                            # playing is never 'pending'
    p.target = 1                                                      # asked for, not yet shown
    assert p.tick() == 1                                              # the same step again, not the next
    p.shown(cur, 1)
    assert p.tick() == 2
    p.shown(cur, 5)
    assert p.stop() and p.target == 5                                 # stepping on starts from the screen
