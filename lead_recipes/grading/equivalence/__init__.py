"""Deciding equivalence: whether an extracted answer equals the gold. `compare.prepare` rewrites a (gold, answer)
pair into forms math-verify compares correctly (units, number forms, vectors and matrices, other forms) and returns
the verdicts that need no math-verify, under the precision a problem states or the default tolerance (precision). See
docs/grading.md#answer-forms.
"""
