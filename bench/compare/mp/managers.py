#!/usr/bin/env python3
"""multiprocessing's managers serving remote environments: 4 cart-poles, one manager process each.

Each env steps --steps times (reset when it falls); every step also sleeps 1 ms, an environment
that waits rather than computes. Two ways to step the four:
  sync     one proxy call after another (4 calls on the critical path a step);
  threads  the four calls of a step from four threads at once (multiprocessing has no async proxy;
           this is the closest), 1 call on the critical path a step.
`steps_time` is the median over --repeat runs of the stepping alone; the ideal is the sleeps on the
critical path, calibrated with what time.sleep(1 ms) takes here. One line a mode:

    managers         lib=mp(fork) mode=sync    envs=4 steps=200 steps_time=0.900s start=0.040s ideal=0.800s ovh_cal/call=95us resets=12
"""
import math
import multiprocessing
import multiprocessing.managers
import random
import time
from concurrent.futures import ThreadPoolExecutor

import timing

STEP_SLEEP = 0.001


class CartPole:
    """The classic cart-pole: a pole on a cart pushed left or right, 0.02 s a step."""
    GRAVITY, CART, POLE, HALF_LENGTH, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02

    def __init__(self, seed):
        self.random = random.Random(seed)
        self.state = [0.0] * 4

    def reset(self):
        self.state = [self.random.uniform(-0.05, 0.05) for _ in range(4)]
        return self.state

    def step(self, push_right):
        x, speed, angle, spin = self.state
        total = self.CART + self.POLE
        cos, sin = math.cos(angle), math.sin(angle)
        lean = ((self.FORCE if push_right else -self.FORCE) + self.POLE * self.HALF_LENGTH * spin * spin * sin) / total
        angular = (self.GRAVITY * sin - cos * lean) / (self.HALF_LENGTH * (4 / 3 - self.POLE * cos * cos / total))
        linear = lean - self.POLE * self.HALF_LENGTH * angular * cos / total
        self.state = [x + self.TAU * speed, speed + self.TAU * linear, angle + self.TAU * spin, spin + self.TAU * angular]
        time.sleep(STEP_SLEEP)
        fell = abs(self.state[0]) > 2.4 or abs(self.state[2]) > math.radians(12)
        return self.state, 1.0, fell


class EnvManager(multiprocessing.managers.BaseManager):
    pass


EnvManager.register("CartPole", CartPole)


def run(mode, envs, steps, pool, choose):
    resets = 0
    began = timing.clock()
    for _ in range(steps):
        pushes = [choose() for _ in envs]
        if mode == "sync":
            results = [env.step(push) for env, push in zip(envs, pushes)]
        else:
            results = list(pool.map(lambda pair: pair[0].step(pair[1]), zip(envs, pushes)))
        for env, (_, _, fell) in zip(envs, results):
            if fell:
                env.reset()
                resets += 1
    return timing.clock() - began, resets


def measure(mode, args, calibrated):
    began = timing.clock()
    managers = [EnvManager(ctx=multiprocessing.get_context("fork")) for _ in range(args.envs)]
    for manager in managers:
        manager.start()
    envs = [manager.CartPole(seed) for seed, manager in enumerate(managers)]
    for env in envs:
        env.reset()
    started = timing.clock() - began
    choose = random.Random(1).random
    with ThreadPoolExecutor(args.envs) as pool:
        runs = [run(mode, envs, args.steps, pool, lambda: choose() < 0.5) for _ in range(args.repeat)]
    for manager in managers:
        manager.shutdown()
    steps_time = timing.median(t for t, _ in runs)
    critical = args.steps * (args.envs if mode == "sync" else 1)
    timing.emit("managers", "fork", mode=f"{mode:7s}", envs=args.envs, steps=args.steps,
                steps_time=f"{steps_time:.3f}s", start=f"{started:.3f}s", ideal=f"{critical * STEP_SLEEP:.3f}s",
                **{"ovh_cal/call": f"{(steps_time - critical * calibrated) / critical * 1e6:.0f}us"},
                resets=sum(r for _, r in runs))


if __name__ == "__main__":
    args = timing.arguments(__doc__, envs=4, steps=200)
    began = timing.clock()
    for _ in range(200):
        time.sleep(STEP_SLEEP)
    calibrated = (timing.clock() - began) / 200
    for mode in ("sync", "threads"):
        measure(mode, args, calibrated)
