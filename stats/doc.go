// Package stats turns quicbench samples into the figures a reader can defend:
// per-cell summaries with confidence intervals, comparisons of two cells
// (paired differences, Welch's t-test, the Mann-Whitney U test, Holm's
// correction, Cliff's delta), verdicts stated with their rule, the "at least
// 10% faster in at least 70% of paired runs" rule of the page-load study and
// a decision tree over a grid plan's factors.
//
// # Conventions
//
// Quantiles use Hyndman and Fan's definition 7 (linear interpolation between
// order statistics at h = (n-1)p), the default of R, NumPy and spreadsheets,
// so the median of {1, 2, 3, 4} is 2.5. Gonum's stat.Quantile offers only
// definitions 1 and 4, so this package computes it on the sorted values.
//
// Intervals are two-sided at Config.Level (95% by default). The interval of a
// mean is mean ± t(1-(1-level)/2, n-1)·s/√n. Intervals of a median and of the
// median of paired differences are percentile bootstrap intervals with
// Config.Resamples resamples drawn from a PCG generator seeded with
// Config.Seed and a stream derived from the cell key (FNV-1a), so a report is
// reproducible bit for bit and does not depend on the order of computation.
//
// # Verdicts
//
// The protocols of one iteration share the link's seed, so two cells A and
// B are compared on their paired differences when the design is paired
// (PairedDesign: at least two pairs holding at least half of each side's
// valid samples): the two-sided Wilcoxon signed-rank test, whose p-value
// is counted exactly over the 2^n sign flips of the ranked differences up
// to MaxExactPairs pairs and taken from the normal approximation with tie
// and continuity correction above. Otherwise (partners failed, a resumed
// run lost them) the two-sided Mann-Whitney U test compares the valid
// values as independent samples (exact distribution when there are no
// ties and one sample has at most 8 values, otherwise the normal
// approximation with tie and continuity correction, as SciPy does).
// Comparison.Test records which test decided.
//
// The p-values are adjusted with Holm's step-down method within a family:
// the comparisons of one test and metric, across its configurations and
// protocol pairs (Config.CorrectionScope "family", the default), or every
// comparison of the run ("run"). A comparison whose adjusted p-value is
// below Config.Alpha gets the verdict "A better" or "B better" in the
// direction of the test's statistic (taking Cell.HigherIsBetter into
// account). Otherwise, when even the most extreme outcome its design
// allows could not have reached alpha (Comparison.MinP: the smallest
// p-value of the test for its sizes times the family size, Holm's first
// step), the verdict is "too few samples", with the pairs needed
// (NeededIterations); only a design that could have reached alpha says
// "no significant difference". Welch's t-test is computed and
// Holm-adjusted too, and shown beside it, but does not decide: page and
// transfer times are skewed and heavy-tailed, which a rank test tolerates.
//
// A significant difference need not matter. Each comparison's
// Hodges-Lehmann estimate and its interval, relative to B's median
// (Comparison.Effect), are placed against a band of ±Config.MinEffect (5%
// by default): an interval within it makes the verdict Negligible (two
// one-sided tests), and a significant verdict whose interval reaches into
// it is "possibly negligible" (ClassifyEffect). Comparison.Significance
// keeps the test's own verdict.
//
// Where a protocol was measured by several implementations, Spreads sets
// each configuration's cells side by side and Decompose splits the
// variation of their log medians between protocol and implementation.
//
// Failures are compared too: Fisher's exact test on the failed and valid
// counts of A and B, and a variant of the test that ranks failed samples
// as the worst values (Failures). docs/statistics.md states every method
// and formula with references.
package stats
