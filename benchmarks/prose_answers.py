"""Prose final answers (not a test): written responses without a box, graded under `final_answer`, counting false
positives and false negatives per split, against math-verify (`parse` + `verify` on the whole response, the anchor,
same run). What counts as which, and the splits: docs/grading.md#measuring.

    .venv/bin/python benchmarks/prose_answers.py"""

from __future__ import annotations

import sys

W = "We compute step by step and check each case.\n\n"

# (split, gold, response, asserts the gold?); over half are False. Each statement follows a line of work, as models
# write them. Splits by role: `tuned` (the rules were written or fixed against them) and `heldout` (written after the
# rules they test, measured once, never tuned on; their misses are not shown by -v).
CASES: list[tuple[str, str, str, bool]] = [
    # ---- the named quantity before "is": its value is what follows
    ("tuned", "34", W + "Final Answer: The largest $n$ is 34.", True),
    ("tuned", "34", W + "Final Answer: The largest $n$ is 35.", False),
    ("tuned", "120", W + "The volume of $ABCD$ is 120.", True),
    ("tuned", "120", W + "The volume of $ABCD$ is 125.", False),
    ("tuned", "120", W + "Therefore, the volume of tetrahedron $ABCD$ is $120$.", True),
    ("tuned", "5", W + "Final Answer: The maximum value that $f(x)$ could take is $5$.", True),
    ("tuned", "5", W + "Final Answer: The maximum value that $f(x)$ could take is $6$.", False),
    ("tuned", "-3", W + "**Final Answer:** The minimum value of $f(x)$ is $-3$.", True),
    ("tuned", "-3", W + "**Final Answer:** The minimum value of $f(x)$ is $3$.", False),
    ("tuned", r"\frac{7}{2}", W + "The answer is: the smallest possible value of $a+b$ is $\\frac{7}{2}$.", True),
    ("tuned", r"\frac{7}{2}", W + "The answer is: the smallest possible value of $a+b$ is $\\frac{2}{7}$.", False),
    ("tuned", "24", W + "Thus the area of triangle $ABC$ equals $24$.", True),
    ("tuned", "24", W + "Thus the area of triangle $ABC$ equals $42$.", False),
    ("tuned", r"\frac{1}{4}", W + "Therefore, the probability that $X > 2$ is $\\frac{1}{4}$.", True),
    ("tuned", r"\frac{1}{4}", W + "Therefore, the probability that $X > 2$ is $\\frac{3}{4}$.", False),
    ("tuned", "67", W + "Thus the number of integers below $200$ that are not divisible by $3$ is $67$.", True),
    ("tuned", "67", W + "Thus the number of integers below $200$ that are not divisible by $3$ is $66$.", False),
    ("tuned", "6", W + "Hence the greatest common divisor of $a$ and $b$ is $6$.", True),
    ("tuned", "6", W + "Hence the greatest common divisor of $a$ and $b$ is $3$.", False),
    ("tuned", r"\frac{\sqrt{3}}{2}", W + "So the value of $\\sin\\theta$ is $\\frac{\\sqrt{3}}{2}$.", True),
    ("tuned", r"\frac{\sqrt{3}}{2}", W + "So the value of $\\sin\\theta$ is $\\frac{\\sqrt{2}}{2}$.", False),
    ("tuned", "2550", W + "Final Answer: The required sum is $S = 2550$.", True),
    ("tuned", "2550", W + "Final Answer: The required sum is $S = 2500$.", False),
    ("tuned", "1024", W + "Answer: the number of subsets of $A$ is $2^{10} = 1024$.", True),
    ("tuned", "1024", W + "Answer: the number of subsets of $A$ is $2^{10} = 1000$.", False),
    ("tuned", "16", W + "In conclusion, the perimeter of square $PQRS$ is $16$ cm.", True),
    ("tuned", "16", W + "In conclusion, the perimeter of square $PQRS$ is $18$ cm.", False),
    ("tuned", r"\frac{5}{3}", W + "So the distance from $P$ to the plane $x+y+z=1$ is $\\frac{5}{3}$.", True),
    ("tuned", r"\frac{5}{3}", W + "So the distance from $P$ to the plane $x+y+z=1$ is $\\frac{3}{5}$.", False),
    # ---- the value before "is the solution / answer"
    ("tuned", r"[5, \infty)", W + "Therefore $x \\ge 5$ is the solution.", True),
    ("tuned", r"[5, \infty)", W + "Therefore $x \\ge 6$ is the solution.", False),
    ("tuned", r"(-2, 3)", W + "Thus $-2 < x < 3$ is the solution set.", True),
    ("tuned", r"(-2, 3)", W + "Thus $-2 < x < 4$ is the solution set.", False),
    ("tuned", "34", W + "So $34$ is the largest such $n$.", True),
    ("tuned", "34", W + "So $33$ is the largest such $n$.", False),
    ("tuned", r"\{1, 2, 3\}", W + "Hence $\\{1, 2, 3\\}$ is the answer.", True),
    ("tuned", r"\{1, 2, 3\}", W + "Hence $\\{1, 2, 4\\}$ is the answer.", False),
    ("tuned", "7", W + "Therefore, $n = 7$ is the only solution.", True),
    ("tuned", "7", W + "Therefore, $n = 8$ is the only solution.", False),
    # ---- plain words after the number
    ("tuned", "12", W + "So the answer is 12 apples.", True),
    ("tuned", "12", W + "So the answer is 13 apples.", False),
    ("tuned", "720", W + "Therefore, there are 720 ways to arrange the books.", True),
    ("tuned", "720", W + "Therefore, there are 702 ways to arrange the books.", False),
    ("tuned", "3.5", W + "The final answer is 3.5 hours.", True),
    ("tuned", "3.5", W + "The final answer is 3.6 hours.", False),
    # ---- labelled values in a final statement
    ("tuned", "(3, -2)", W + "Final answer: $x = 3$ and $y = -2$.", True),
    ("tuned", "(3, -2)", W + "Final answer: $x = -2$ and $y = 3$.", False),
    # ---- refusals that must stay (hedged, negated, conditional, alternative, retracted)
    ("tuned", "34", W + "Final Answer: The largest $n$ could be 34.", False),
    ("tuned", "34", W + "The answer is probably 34.", False),
    ("tuned", "34", W + "The largest $n$ is not 34.", False),
    ("tuned", "34", W + "I am not sure; the answer might be $34$.", False),
    ("tuned", "120", W + "The volume of $ABCD$ is either 120 or 130.", False),
    ("tuned", "34", W + "So the largest $n$ is $34$... wait, actually it is $35$.", False),
    ("tuned", "34", W + "If $n$ is even, the largest $n$ is $34$.", False),
    ("tuned", r"[5, \infty)", W + "Therefore $x \\ge 5$ is not the solution.", False),
    ("tuned", "5", W + "Thus the answer cannot be $5$.", False),
    ("tuned", "5", W + "The answer is $5$ or $6$.", False),
    ("tuned", "5", W + "Therefore $x = 5$ is a candidate, but we still have to check it.", False),
    ("tuned", "5", W + "The maximum value of $f(x)$ is possibly $5$.", False),
    ("tuned", "5", W + "The maximum value of $f(x)$ may be $5$.", False),
    ("tuned", "5", W + "The answer is $5$ if $a > 0$, otherwise $7$.", False),
    ("tuned", "5", W + "Final Answer: The value of $k$ isn't $5$.", False),
    ("tuned", "5", W + "The answer is $5$. No, wait, it should be $6$.", False),
    ("tuned", "5", "We first try $x = 5$ and it works for the first equation.\n\nNow the second equation gives", False),
    ("tuned", "5", "<think>The answer is 5.</think>\nI could not finish.", False),
    # ---- plain statements every rule must keep reading
    ("tuned", "20", W + "Therefore the rope is 20 cm.", True),
    ("tuned", "20", W + "Therefore the rope is 21 cm.", False),
    ("tuned", "7", W + "**Answer:** $7$", True),
    ("tuned", "7", W + "**Answer:** $8$", False),
    ("tuned", "29", W + "Hence, $m + n = 29$.", True),
    ("tuned", "29", W + "Hence, $m + n = 28$.", False),
    ("tuned", r"\frac{3}{4}", W + "The final answer is $\\frac{3}{4}$. I hope it is correct.", True),
    ("tuned", r"\frac{3}{4}", W + "The final answer is $\\frac{4}{3}$. I hope it is correct.", False),
    ("tuned", "-1, -9", W + "Therefore, $k=-1$ or $k=-9$.", True),
    ("tuned", "-1, -9", W + "Therefore, $k=-1$ or $k=-8$.", False),
    ("tuned", "590", "Work:\n$$\n\\begin{aligned}\nS & =570+20 \\\\\n& =590\n\\end{aligned}\n$$", True),
    ("tuned", "590", "Work:\n$$\n\\begin{aligned}\nS & =570+20 \\\\\n& =580\n\\end{aligned}\n$$", False),
    # ---- more of the kinds above: named quantities, values first, units, refusals
    ("tuned", "15", W + "Final Answer: The number of diagonals of the hexagon is 15.", True),
    ("tuned", "15", W + "Final Answer: The number of diagonals of the hexagon is 9.", False),
    ("tuned", "42", W + "Therefore, the sum of all elements of $S$ is $42$.", True),
    ("tuned", "42", W + "Therefore, the sum of all elements of $S$ is $44$.", False),
    ("tuned", r"\frac{1}{6}", W + "So the probability of rolling a $6$ on one die is $\\frac{1}{6}$.", True),
    ("tuned", r"\frac{1}{6}", W + "So the probability of rolling a $6$ on one die is $\\frac{1}{5}$.", False),
    ("tuned", "8", W + "The answer is: the length of side $BC$ is $8$.", True),
    ("tuned", "8", W + "The answer is: the length of side $BC$ is $9$.", False),
    ("tuned", "100", W + "Thus, the smallest $k$ for which $f(k) > 0$ is $100$.", True),
    ("tuned", "100", W + "Thus, the smallest $k$ for which $f(k) > 0$ is $101$.", False),
    ("tuned", r"2\sqrt{5}", W + "Hence the radius of the circle through $A$, $B$ and $C$ is $2\\sqrt{5}$.", True),
    ("tuned", r"2\sqrt{5}", W + "Hence the radius of the circle through $A$, $B$ and $C$ is $2\\sqrt{3}$.", False),
    ("tuned", "(-\\infty, 1)", W + "Therefore $x < 1$ is the solution.", True),
    ("tuned", "(-\\infty, 1)", W + "Therefore $x < 2$ is the solution.", False),
    ("tuned", "12", W + "So $12$ is the answer.", True),
    ("tuned", "12", W + "So $21$ is the answer.", False),
    ("tuned", "9", W + "Final answer: there are 9 such numbers.", True),
    ("tuned", "9", W + "Final answer: there are 8 such numbers.", False),
    ("tuned", "60", W + "Thus the measure of angle $ABC$ is $60^\\circ$.", True),
    ("tuned", "60", W + "Thus the measure of angle $ABC$ is $30^\\circ$.", False),
    ("tuned", "3", W + "Final Answer: The value of $x$ that satisfies the equation is $3$.", True),
    ("tuned", "3", W + "Final Answer: The value of $x$ that satisfies the equation is $-3$.", False),
    ("tuned", "50", W + "So the total cost of the $5$ books is $50$ dollars.", True),
    ("tuned", "50", W + "So the total cost of the $5$ books is $55$ dollars.", False),
    ("tuned", "3", W + "The answer could be $3$ or $4$.", False),
    ("tuned", "3", W + "The value of $x$ is probably $3$.", False),
    ("tuned", "3", W + "Thus $x$ is not equal to $3$.", False),
    ("tuned", "3", W + "The smallest $x$ is $3$, unless $a < 0$, in which case it is $4$.", False),
    ("tuned", "3", W + "Perhaps the answer is $3$.", False),
    ("tuned", "3", W + "So $x = 3$... no, that fails the second equation.", False),
    ("tuned", "3", W + "Therefore $x = 3$ is not a solution.", False),
    ("tuned", "3", W + "If $a = 1$, then the answer is $3$.", False),
    ("tuned", "11", W + "Answer: the remainder when $N$ is divided by $13$ is $11$.", True),
    ("tuned", "11", W + "Answer: the remainder when $N$ is divided by $13$ is $12$.", False),
    ("tuned", "4", W + "Hence the number of real roots of $p(x)$ is $4$.", True),
    ("tuned", "4", W + "Hence the number of real roots of $p(x)$ is $2$.", False),
    ("tuned", "25", W + "In conclusion, $a^2 + b^2 = 25$.", True),
    ("tuned", "25", W + "In conclusion, $a^2 + b^2 = 24$.", False),
    ("tuned", "1", W + "The final answer is that the limit equals $1$.", True),
    ("tuned", "1", W + "The final answer is that the limit equals $0$.", False),
    # ---- named quantities, ranges, units and refusals
    ("heldout", "48", W + "Final Answer: The total number of handshakes at the party is 48.", True),
    ("heldout", "48", W + "Final Answer: The total number of handshakes at the party is 45.", False),
    (
        "heldout",
        r"\frac{2}{3}",
        W + "Thus the ratio of the areas of $\\triangle ABD$ and $\\triangle ACD$ is $\\frac{2}{3}$.",
        True,
    ),
    (
        "heldout",
        r"\frac{2}{3}",
        W + "Thus the ratio of the areas of $\\triangle ABD$ and $\\triangle ACD$ is $\\frac{3}{2}$.",
        False,
    ),
    ("heldout", "7", W + "The answer is: the least positive integer $m$ with $m^2 > 40$ is $7$.", True),
    ("heldout", "7", W + "The answer is: the least positive integer $m$ with $m^2 > 40$ is $6$.", False),
    ("heldout", r"(1, \infty)", W + "Hence $t > 1$ is the required range.", True),
    ("heldout", r"(1, \infty)", W + "Hence $t > 2$ is the required range.", False),
    ("heldout", "30", W + "So the speed of the train is 30 km per hour.", True),
    ("heldout", "30", W + "So the speed of the train is 35 km per hour.", False),
    ("heldout", "6", W + "Therefore, the number of ways the committee can be chosen is $6$.", True),
    ("heldout", "6", W + "Therefore, the number of ways the committee can be chosen is $8$.", False),
    ("heldout", "6", W + "Therefore the number of ways is likely $6$.", False),
    ("heldout", "6", W + "So the count might be $6$, though we have not checked the last case.", False),
    ("heldout", "6", W + "The count is $6$ or $7$, depending on the convention.", False),
    ("heldout", "6", W + "Assuming the dice are fair, the answer is $6$.", False),
    ("heldout", "6", W + "The count is $6$. Actually, we double counted, so it is $3$.", False),
    ("heldout", "6", W + "Thus the count is not $6$.", False),
    ("heldout", "-1", W + "Final Answer: the value of $\\cos\\pi$ is $-1$.", True),
    ("heldout", "-1", W + "Final Answer: the value of $\\cos\\pi$ is $1$.", False),
    # ---- negation in an earlier clause, restatements, lists, contrasts
    ("tuned", "5", W + "Since no other value works, the answer is 5.", True),
    ("tuned", "5", W + "Since no other value works, the answer is 6.", False),
    ("tuned", "4", W + "Since $x$ cannot be negative, the answer is $x = 4$.", True),
    ("tuned", "12", W + "No other integer satisfies both conditions, so the answer is $12$.", True),
    ("tuned", "12", W + "No other integer satisfies both conditions, so the answer is not $12$.", False),
    ("tuned", "2", W + "Because the discriminant is not zero, the number of real roots is $2$.", True),
    ("tuned", "2", W + "Because the discriminant is zero, the number of real roots is not $2$.", False),
    ("tuned", "7", W + "We do not need to check larger values, so the answer is $7$.", True),
    ("tuned", "7", W + "I don't think the answer is $7$.", False),
    ("tuned", "7", W + "It is not the case that the answer is $7$.", False),
    ("tuned", "7", W + "If $a > 0$, the answer is $7$.", False),
    ("tuned", r"\frac{5}{36}", W + r"So the probability is $\frac{5}{36}$, or about $0.139$.", True),
    ("tuned", r"\frac{5}{36}", W + r"So the probability is $\frac{5}{36}$ or $\frac{1}{6}$.", False),
    ("tuned", "5", W + "The answer is $5$, and the remainder is $2$.", True),
    ("tuned", "5, 6", W + "The answer is $5$ and $6$.", True),
    ("tuned", "34", W + "So the answer is 34, not 35.", True),
    ("tuned", "34", W + "Final Answer: $n = 34$", True),
    ("tuned", "34", W + "Final Answer: $n = 35$", False),
    ("tuned", "24", W + "The number of ways we could arrange them is $24$.", True),
    ("tuned", "24", W + "The number of ways could be $24$.", False),
    ("tuned", "9", W + "The greatest value that $g(x)$ can attain is $9$.", True),
    ("tuned", "9", W + "The greatest value of $g(x)$ may be $9$.", False),
    ("tuned", "(1, 2)", W + "Therefore $(1, 2)$ is the only pair that works.", True),
    ("tuned", "(1, 2)", W + "Therefore $(1, 2)$ is the only pair that fails.", False),
    ("tuned", r"[5, \infty)", W + r"Hence $x \ge 5$ is the solution.", True),
    ("tuned", r"[5, \infty)", W + r"Therefore, the solution is $x \ge 5$.", True),
    ("tuned", r"[5, \infty)", W + r"Therefore, the solution is $x \ge 6$.", False),
    ("tuned", "3", W + "Final Answer: The final answer is $3$. I hope it is correct.", True),
    ("tuned", "3", W + "Final Answer: The final answer is $4$. I hope it is correct.", False),
    ("tuned", "-3", W + r"Therefore, the sum of the roots is $-\frac{b}{a} = -3$.", True),
    ("tuned", "10", W + "No, the answer is $10$.", True),
    ("tuned", "10", W + "The answer is $10$. Wait, no, it should be $12$.", False),
    ("tuned", "10", W + "Although $x$ is not an integer, $y$ is, and the answer is $10$.", True),
    ("tuned", "10", W + "Unless $a = 0$, the answer is $10$.", False),
    ("tuned", "10", W + "The answer is $10$ only when $a$ is even.", False),
    # ---- negation in an earlier clause, restatements, contrasts, conditions
    ("heldout", "8", W + "Since none of the smaller cases work, the smallest such $n$ is $8$.", True),
    ("heldout", "8", W + "Since none of the smaller cases work, the smallest such $n$ is $9$.", False),
    ("heldout", "8", W + "There is no need to go further, so the answer is $8$.", True),
    ("heldout", "8", W + "We cannot be sure the answer is $8$.", False),
    ("heldout", "8", W + "If we ignore the boundary, the answer is $8$.", False),
    ("heldout", r"\frac{2}{9}", W + r"Thus the probability is $\frac{2}{9}$, approximately $0.222$.", True),
    ("heldout", r"\frac{2}{9}", W + r"Thus the probability is $\frac{2}{9}$ or $\frac{1}{3}$.", False),
    ("heldout", "15", W + "The total is $15$, and the average is $3$.", True),
    ("heldout", "15", W + "The answer is 15, not 16.", True),
    ("heldout", "15", W + "The answer is 16, not 15.", False),
    ("heldout", "(3, 4)", W + "Therefore $(3, 4)$ is the unique point of intersection.", True),
    ("heldout", "(3, 4)", W + "Therefore $(3, 4)$ is the extraneous point, so there is no intersection.", False),
    ("heldout", "12", W + "Answer: 12", True),
    ("heldout", "12", W + "The maximum is $12$, achieved when $a = b$.", True),
    ("heldout", "12", W + "The maximum is $12$ only if $a = b$.", False),
    ("heldout", "6", W + "Because no two of them share a color, the number of colorings is $6$.", True),
]


def main() -> int:
    import logging
    import time

    from math_verify import parse, verify

    from lead_recipes.grading.pool.grader import Grader

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    with Grader(timeout_s=5.0, workers=2, extraction="final_answer").start() as g:
        t = time.perf_counter()
        ours = [x.correct for x in g.grade_many([(gold, resp, None) for _, gold, resp, _ in CASES])]
        t_ours = time.perf_counter() - t
    t = time.perf_counter()
    mv = []
    for _, gold, resp, _ in CASES:
        try:
            mv.append(bool(verify(parse("$" + gold + "$"), parse(resp))))
        except Exception:  # noqa: BLE001 - the anchor as users run it: errors count as wrong
            mv.append(False)
    t_mv = time.perf_counter() - t
    print("| split | grader | responses | false positives | false negatives | agreement |")
    print("|---|---|---:|---:|---:|---:|")
    for split in ("tuned", "heldout", "all"):
        idx = [i for i, c in enumerate(CASES) if split in ("all", c[0])]
        neg = sum(not CASES[i][3] for i in idx)
        pos = len(idx) - neg
        for name, v in (("ours (final_answer)", ours), ("math-verify", mv)):
            fp = sum(v[i] and not CASES[i][3] for i in idx)
            fn = sum(not v[i] and CASES[i][3] for i in idx)
            print(
                f"| {split} | {name} | {len(idx)} | {fp}/{neg} | {fn}/{pos} "
                f"| {100 * (len(idx) - fp - fn) / len(idx):.1f}% |"
            )
    print(f"\nours {t_ours:.2f}s, math-verify {t_mv:.2f}s for {len(CASES)} responses")
    if "-v" in sys.argv:
        for i, c in enumerate(CASES):
            if ours[i] != c[3] and c[0] == "tuned":  # held-out misses are not shown: not for tuning
                print(f"MISS ours={ours[i]} label={c[3]} [{c[0]}] gold={c[1]!r} :: {c[2][len(W) :]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
