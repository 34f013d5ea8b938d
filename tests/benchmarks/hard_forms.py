"""Hard answer forms for the grader benchmark (not a test): (category, gold, model answer, correct?) written by hand,
each right form next to the same form with a wrong value, so a grader that says "wrong" to everything scores about
half. `response(case)` is the full model text graders see: the answer in `\\boxed{}` after a short solution, except
in the `stated, no box` and `prose statement` categories, whose answers are stated without a box ("Therefore the
rope is 20 cm."), and `several boxes`, whose answer is the whole response.

    from hard_forms import CASES, response
"""

from __future__ import annotations

CASES: list[tuple[str, str, str, bool]] = [
    # ---- units and words on one side
    ("units/words", r"4\sqrt{2}\text{ cm}", r"4\sqrt2", True),
    ("units/words", r"4\sqrt{2}\text{ cm}", r"4\sqrt3", False),
    ("units/words", "20", r"20\text{ cm}", True),
    ("units/words", "20", r"21\text{ cm}", False),
    ("units/words", r"5\text{ students}", "5", True),
    ("units/words", r"5\text{ students}", "6", False),
    ("units/words", r"12\text{ inches}", r"12 \text{ in.}", True),
    ("units/words", r"3\text{ hours}", r"4\text{ hours}", False),
    # ---- percent where a percent is asked, and currency
    ("percent/currency", r"25\%", "25", True),
    ("percent/currency", r"25\%", "26", False),
    ("percent/currency", r"12.5\%", r"12.5\%", True),
    ("percent/currency", r"12.5\%", r"125\%", False),
    ("percent/currency", r"\$7.00", "7", True),
    ("percent/currency", r"\$7.00", "7.5", False),
    ("percent/currency", "18.90", r"\$18.90", True),
    ("percent/currency", "18.90", r"\$19.80", False),
    # ---- multiple-choice letters in one \text{}
    ("choice letters", r"\text{B,C}", "B, C", True),
    ("choice letters", r"\text{B,C}", "B, D", False),
    ("choice letters", "A, C, E", r"\text{A, C, E}", True),
    ("choice letters", "A, C, E", r"\text{A, C}", False),
    ("choice letters", r"\text{(B)}", "B", True),
    ("choice letters", r"\text{(B)}", "C", False),
    # ---- labelled answers vs bare values
    ("labelled", "3, 7", "p=3, q=7", True),
    ("labelled", "3, 7", "p=3, q=8", False),
    ("labelled", "12", "y = 12", True),
    ("labelled", "12", "y = 13", False),
    ("labelled", "9, 2", "T(4)=9, T(5)=2", True),
    ("labelled", "9, 2", "T(4)=2, T(5)=9", False),
    ("labelled", "a=1, b=-4", "1, -4", True),
    ("labelled", "a=1, b=-4", "-4, 1", False),
    ("labelled", r"f(1)=5, f(2)=\frac{1}{2}", r"5, \frac12", True),
    ("labelled", r"f(1)=5, f(2)=\frac{1}{2}", r"5, \frac13", False),
    # ---- function answers with a renamed variable
    ("renamed variable", "g(x)=x^2+1", "g(t)=t^2+1", True),
    ("renamed variable", "g(x)=x^2+1", "g(t)=t^2-1", False),
    ("renamed variable", "x^2+1", "g(t)=t^2+1", True),
    ("renamed variable", "x^2+1", "g(t)=t^2+2", False),
    ("renamed variable", r"f(x)=\frac{1}{x}", r"f(y)=\frac{1}{y}", True),
    ("renamed variable", r"f(x)=\frac{1}{x}", r"f(y)=\frac{2}{y}", False),
    ("renamed variable", r"h(n)=2^n-1", r"h(k)=2^k-1", True),
    ("renamed variable", r"h(n)=2^n-1", r"h(k)=2^k+1", False),
    # ---- inequalities vs intervals vs set-builder notation
    ("inequality/interval", r"(2,\infty)", "m > 2", True),
    ("inequality/interval", r"(2,\infty)", r"m \ge 2", False),
    ("inequality/interval", r"[-3,1)", r"-3 \le x < 1", True),
    ("inequality/interval", r"[-3,1)", r"-3 \le x \le 1", False),
    ("inequality/interval", "(0,4)", r"\{x \mid 0<x<4\}", True),
    ("inequality/interval", "(0,4)", r"\{x \mid 0<x<5\}", False),
    ("inequality/interval", r"\{x : x \le 5\}", r"(-\infty, 5]", True),
    ("inequality/interval", r"\{x : x \le 5\}", r"(-\infty, 5)", False),
    ("inequality/interval", r"(-\infty,-1) \cup (2,\infty)", r"x<-1 \text{ or } x>2", True),
    ("inequality/interval", r"(-\infty,-1) \cup (2,\infty)", r"x<-1 \text{ or } x>3", False),
    ("inequality/interval", r"\left[\frac{1}{2}, 3\right]", r"\frac12 \leq a \leq 3", True),
    ("inequality/interval", r"\left[\frac{1}{2}, 3\right]", r"\frac12 < a \leq 3", False),
    # ---- column vectors vs tuples
    ("vector/tuple", "(1,-2)", r"\begin{pmatrix}1\\-2\end{pmatrix}", True),
    ("vector/tuple", "(1,-2)", r"\begin{pmatrix}-2\\1\end{pmatrix}", False),
    ("vector/tuple", r"\begin{pmatrix} 3 \\ 0 \\ -1 \end{pmatrix}", "(3, 0, -1)", True),
    ("vector/tuple", r"\begin{pmatrix} 3 \\ 0 \\ -1 \end{pmatrix}", "(3, 0, 1)", False),
    ("vector/tuple", r"\begin{pmatrix}\frac{1}{2}\\ \sqrt{3}\end{pmatrix}", r"\left(\frac12, \sqrt3\right)", True),
    ("vector/tuple", r"\begin{pmatrix}\frac{1}{2}\\ \sqrt{3}\end{pmatrix}", r"\left(\sqrt3, \frac12\right)", False),
    ("vector/tuple", r"(2, 5, 1)", r"\langle 2, 5, 1 \rangle", True),
    ("vector/tuple", r"(2, 5, 1)", r"\langle 2, 1, 5 \rangle", False),
    # ---- unordered solution lists vs ordered tuples
    ("unordered/ordered", "-2, 3", "3, -2", True),
    ("unordered/ordered", "-2, 3", "3, 2", False),
    ("unordered/ordered", r"1, 2, 4", r"x = 4, x = 1, x = 2", True),
    ("unordered/ordered", r"1, 2, 4", r"x = 4, x = 1", False),
    ("unordered/ordered", "(1, 2)", "(2, 1)", False),
    ("unordered/ordered", "(1, 2)", "(1,2)", True),
    ("unordered/ordered", r"\pm 3", "3, -3", True),
    ("unordered/ordered", r"\pm 3", "3", False),
    # ---- degrees-minutes and compound units
    ("degrees-minutes", r"30^\circ 15'", r"30.25^\circ", True),
    ("degrees-minutes", r"30^\circ 15'", r"30.15^\circ", False),
    ("degrees-minutes", r"12.5", r"12^{\circ} 30'", True),
    ("degrees-minutes", r"12.5", r"12^{\circ} 50'", False),
    ("degrees-minutes", r"45^\circ 20' 24''", r"45.34^\circ", True),
    ("degrees-minutes", r"45^\circ 20' 24''", r"45.2024^\circ", False),
    # ---- the same formula spelled differently
    ("spelling", r"\text{ML} \perp \text{NK}", r"ML\perp NK", True),
    ("spelling", r"\text{ML} \perp \text{NK}", r"ML\perp NL", False),
    ("spelling", r"\angle \text{ABC}", r"\angle ABC", True),
    ("spelling", r"\angle \text{ABC}", r"\angle ACB", False),
    ("spelling", r"(a, n) = (a, 1)", r"(a, 1) \text{ for any positive integer } a", True),
    ("spelling", r"(a, n) = (a, 1)", r"(a, 2) \text{ for any positive integer } a", False),
    # ---- correct answers stated without a box (the final_answer policy)
    ("stated, no box", "20", "Adding the pieces, 3 + 17 = 20.\n\nTherefore the rope is 20 cm.", True),
    ("stated, no box", "20", "Adding the pieces, 3 + 17 = 20.\n\nTherefore the rope is 21 cm.", False),
    ("stated, no box", "7", "Each costs 1.75 and there are 4.\n\n**Answer:** $7.00", True),
    ("stated, no box", "7", "Each costs 1.75 and there are 4 and 12 more.\n\n**Answer:** $8.00", False),
    ("stated, no box", r"\frac{3}{4}", "So 3 of 4 cases work.\n\nThe final answer is $\\frac{3}{4}$.", True),
    ("stated, no box", r"\frac{3}{4}", "So 3 of 4 cases work.\n\nThe final answer is $\\frac{4}{3}$.", False),
    (
        "stated, no box",
        "13",
        "We find x = 13 early on, but let us check the other case.\n\nThe other case gives",
        False,
    ),
    ("stated, no box", "42", "<think>The answer is 42.</think>\nI could not finish the computation.", False),
    # ---- several boxes (the answer is the whole response)
    ("several boxes", "(1, 3), (4, 2)", r"So the pairs are $\boxed{(1, 3)}$ and $\boxed{(4, 2)}$.", True),
    ("several boxes", "(1, 3), (4, 2)", r"So the pairs are $\boxed{(1, 3)}$ and $\boxed{(4, 3)}$.", False),
    ("several boxes", "2, -3", r"The roots are $x = \boxed{2}$ or $x = \boxed{-3}$.", True),
    ("several boxes", "2, -3", r"The roots are $x = \boxed{2}$ or $x = \boxed{3}$.", False),
    ("several boxes", r"$\boxed{1}$ and $\boxed{5}$", r"The solutions are $\boxed{5, 1}$.", True),
    ("several boxes", r"$\boxed{1}$ and $\boxed{5}$", r"The solutions are $\boxed{5}$.", False),
    ("several boxes", "1, 2", "We find $a = \\boxed{3}$. Then the roots are $\\boxed{1}$ and $\\boxed{2}$.", True),
    ("several boxes", "1, 2, 3", "We find $a = \\boxed{3}$. Then the roots are $\\boxed{1}$ and $\\boxed{2}$.", False),
    # ---- prose final statements (the answer is the whole response)
    ("prose statement", "34", "Checking all cases.\n\nFinal Answer: The largest $n$ is 34.", True),
    ("prose statement", "34", "Checking all cases.\n\nFinal Answer: The largest $n$ is 35.", False),
    ("prose statement", "120", "Using the formula.\n\nThe volume of $ABCD$ is 120.", True),
    ("prose statement", "120", "Using the formula.\n\nThe volume of $ABCD$ is either 120 or 130.", False),
    ("prose statement", "5", "Maximising.\n\nFinal Answer: The maximum value that $f(x)$ could take is $5$.", True),
    ("prose statement", "5", "Maximising.\n\nFinal Answer: The maximum value of $f(x)$ could be $5$.", False),
    ("prose statement", r"[5, \infty)", "Solving.\n\nTherefore $x \\ge 5$ is the solution.", True),
    ("prose statement", r"[5, \infty)", "Solving.\n\nTherefore $x \\ge 5$ is not the solution.", False),
    # ---- units and words against a gold without one
    ("units, no gold unit", "10", "10 weeks", True),
    ("units, no gold unit", "10", "11 weeks", False),
    ("units, no gold unit", "10", "10weeks", True),
    ("units, no gold unit", "10", "10 cm^2", True),
    ("units, no gold unit", "10", "12 cm^2", False),
    ("units, no gold unit", "10 weeks", "10", True),
    ("units, no gold unit", r"12\text{ cm}", r"12\text{ mm}", False),
    ("units, no gold unit", "12 inches", r"12\text{ in.}", True),
    # ---- number forms
    ("number forms", r"\frac{3}{2}", "1 1/2", True),
    ("number forms", r"\frac{3}{2}", "1 1/3", False),
    ("number forms", r"-\frac{11}{4}", r"-2\frac{3}{4}", True),
    ("number forms", r"-\frac{11}{4}", r"-2\frac{1}{4}", False),
    ("number forms", "3.5", "3,5", True),
    ("number forms", "3, 5", "3,5", True),
    ("number forms", "3.5", "3, 5", False),
    ("number forms", "1000, 2000", "1,000, 2,000", True),
    ("number forms", "1000, 2000", "1,000, 2,001", False),
    ("number forms", r"\frac{1}{3}", "0.3333", True),
    ("number forms", r"\frac{1}{3}", "0.3334", False),
    ("number forms", r"\frac{1}{3}", "0.33", False),
    # ---- vectors and matrices in bracket lists
    ("matrix notation", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", "[[1, 2], [3, 4]]", True),
    ("matrix notation", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", "[[1, 3], [2, 4]]", False),
    ("matrix notation", r"\begin{pmatrix}1\\-2\\3\end{pmatrix}", "[1, -2, 3]", True),
    ("matrix notation", r"\begin{pmatrix}1\\-2\\3\end{pmatrix}", "[1, 2, 3]", False),
    ("matrix notation", "(1, 2, 3)", r"\begin{pmatrix}1 & 2 & 3\end{pmatrix}", True),
    ("matrix notation", "(1, 2, 3)", r"\begin{pmatrix}1 & 3 & 2\end{pmatrix}", False),
]


def response(case: tuple[str, str, str, bool]) -> str:
    """The model text a grader sees for `case`."""
    category, _, answer, _ = case
    if category in ("stated, no box", "several boxes", "prose statement"):
        return answer
    return f"We work it out step by step and check the result.\n\nThe answer is $\\boxed{{{answer}}}$."
