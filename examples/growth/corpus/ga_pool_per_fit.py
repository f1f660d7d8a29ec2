"""A genetic feature selector that makes a multiprocessing.Pool in each fit and never closes it; the fitted selectors are kept, so their pools' worker processes stay.

Source: https://github.com/manuel-calzolari/sklearn-genetic/pull/1 (sklearn-genetic #1, 2017)
Reporter's words: "Processes aren't properly closed after the algorithm runs. When running multiple
  GA executions in a loop, the OS will eventually hit the limit for number of processes."
Changes for this machine: a toy fitness (numpy) instead of a scikit-learn estimator, 2 workers, 6
  generations per fit; the selectors are kept in a list (one per dataset, as a loop's results).
Grows: processes (2 pool workers per fit) and the pool's 3 handler threads in the parent
Dies of: pids 64 after ~60-90 s (fork fails: EAGAIN)
Prints: "Selecting features with genetic algorithm." per fit, then a line per generation
"""
import multiprocessing
import random

import numpy as np


def fitness(individual):
    x = np.asarray(individual, dtype=float)
    return float(np.sum(x * np.sin(np.arange(x.size))) - 0.1 * x.sum())


class GeneticSelectionCV:
    def __init__(self, n_jobs=2, n_generations=6, n_population=40, n_features=30):
        self.n_jobs, self.n_generations = n_jobs, n_generations
        self.n_population, self.n_features = n_population, n_features

    def fit(self):
        print("Selecting features with genetic algorithm.", flush=True)
        pool = multiprocessing.Pool(self.n_jobs)  # the bug: never closed nor joined
        self.pool = pool
        pop = [[random.randint(0, 1) for _ in range(self.n_features)]
               for _ in range(self.n_population)]
        for gen in range(self.n_generations):
            scores = pool.map(fitness, pop)
            best = sorted(zip(scores, pop), reverse=True)[: self.n_population // 2]
            pop = [p for _, p in best] + [[b ^ (random.random() < 0.05) for b in p]
                                          for _, p in best]
            print(f"{gen}\t{self.n_population}\t{max(scores):.3f}", flush=True)
        self.support_ = best[0][1]
        return self


if __name__ == "__main__":
    import time

    selectors = []
    while True:
        selectors.append(GeneticSelectionCV().fit())
        time.sleep(4)
