"""Hand-written cases (not a test; read by hard_forms.py) of what released checkpoints and policies that stop boxing
write: two exact forms that differ by a tiny amount, approximations inside tuples, intervals and matrices, a response
that runs on into a new turn, a last stated answer with no box or answer phrase, dataset answer lines, a bare braced
gold over several boxes, and equation or labelled-form pairs. Each right case sits next to a wrong one of the same
form. Written for the rules of docs/grading.md, none copied from a public suite; split `released` in
docs/benchmarks.md#grader-accuracy-and-throughput.
Rows are (kind, gold, answer, correct, problem); `answer` is the whole response for the kinds in `RESPONSE_KINDS`,
else the boxed answer.
"""

from __future__ import annotations

RESPONSE_KINDS = ("turn markers", "last stated value", "dataset lines", "braced-set gold")
W = "Let me work through it.\n\n"
QWEN = W + (
    "So she sells 84 eggs: $\\boxed{84}$.<|im_end|>\n<|im_start|>user\nAnd in a month?<|im_start|>assistant\n"
    "$\\boxed{360}$"
)
R1 = W + "Hence the perimeter is 12 cm.<｜end▁of▁sentence｜><｜User｜>A square of side 5?<｜Assistant｜>It is 20 cm."
LLAMA = W + "The answer is $7$.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nTry 9. The answer is $9$."
HUMAN = W + "Thus the total is 15 marbles.\n\nHuman: And with 20 marbles?\n\nAssistant: The total is 20 marbles."
USER = W + "Combining the cases, we get $\\boxed{6}$.\nUser: Solve x+2=10.\nThe answer is $\\boxed{8}$."
INSTRUCTION = W + "So the answer is 3.\n\n### Instruction:\nFind the next prime after 5.\n\n### Response:\nIt is 7."
TRAIN = "A train travels 180 km in 4 hours. What is its speed in km/h?"
ECHO = W + "A train travels 180 km in 4 hours, so its speed is 45 km/h.\n\n" + TRAIN + " The answer is 60."
FRACTION = "Express your answer as a common fraction."
# An R1-style response that re-reads the problem while it thinks: no echo before `</think>` ends the response.
THINK = (
    "<think>\nMaybe it is $\\boxed{40}$? Let me re-read the problem.\n" + TRAIN + "\n180 / 4 = 45.\n</think>\n"
    "Its speed is $\\boxed{45}$ km/h."
)

ROWS: list[tuple] = [
    # ---- no tolerance between two exact forms
    ("exact vs exact", "1+2^{-2020}", "1", False, None),
    ("exact vs exact", "1+2^{-2020}", "2^{-2020}+1", True, None),
    ("exact vs exact", r"\frac{3-3^{-999}}{4}", r"\frac{3}{4}+\frac{1}{4\cdot 3^{1000}}", False, None),
    ("exact vs exact", r"\frac{3-3^{-999}}{4}", r"\frac{3}{4}-\frac{1}{4\cdot 3^{999}}", True, None),
    ("exact vs exact", r"\frac{5^{40}+1}{5^{40}}", "1", False, None),
    ("exact vs exact", r"\frac{5^{40}+1}{5^{40}}", r"1+5^{-40}", True, None),
    ("exact vs exact", r"10^{-30}", "0", False, None),
    ("exact vs exact", r"\sqrt{2}+10^{-40}", r"\sqrt{2}", False, None),
    ("exact vs exact", r"\sqrt{7+4\sqrt{3}}", r"2+\sqrt{3}", True, None),
    ("exact vs exact", r"(\frac{1}{2}, 3^{-50})", "(\\frac{1}{2}, 0)", False, None),
    ("exact vs exact", r"(\frac{1}{2}, 3^{-50})", r"(0.5, 3^{-50})", True, None),
    ("exact vs exact", r"1-\frac{1}{e}", r"1+\frac{1}{e}", False, None),
    # ---- one rule for approximations: the digits written (at least three significant ones), or within rel_tol
    ("approximations", r"[\frac14, \frac{10}{7})", "[0.25, 1.4286)", True, None),
    ("approximations", r"[\frac14, \frac{10}{7})", "[0.25, 1.42)", False, None),
    ("approximations", r"[\frac14, \frac{10}{7})", "[0.25, 1.4286]", False, None),
    ("approximations", r"(\frac23, \frac25)", "(0.667, 0.4)", True, None),
    ("approximations", r"(\frac23, \frac25)", "(0.666, 0.4)", False, None),
    ("approximations", r"(\frac23, \frac25)", "(0.67, 0.4)", False, None),
    ("approximations", r"(\frac23, \frac25)", "(0.4, 0.667)", False, None),
    (
        "approximations",
        r"\begin{pmatrix}\frac13 & \frac12\end{pmatrix}",
        r"\begin{pmatrix}0.333 & 0.5\end{pmatrix}",
        True,
        None,
    ),
    (
        "approximations",
        r"\begin{pmatrix}\frac13 & \frac12\end{pmatrix}",
        r"\begin{pmatrix}0.33 & 0.5\end{pmatrix}",
        False,
        None,
    ),
    ("approximations", r"(\sqrt{2}, \pi)", "(1.41, 3.14)", True, None),
    ("approximations", r"(\sqrt{2}, \pi)", "(1.41, 3.15)", False, None),
    ("approximations", r"\frac{5}{9}", "0.556", True, None),
    ("approximations", r"\frac{5}{9}", "0.555", False, None),
    ("approximations", r"\frac{5}{9}", "0.56", False, None),
    ("approximations", r"\ln 3", "1.099", True, None),
    ("approximations", r"\ln 3", "1.098", False, None),
    ("approximations", r"\{\frac{1}{7}, 2\}", r"\{2, 0.143\}", True, None),
    ("approximations", r"\{\frac{1}{7}, 2\}", r"\{2, 0.142\}", False, None),
    ("approximations", r"\frac{1}{8}", "0.13", False, None),
    # nine places and more: a decimal `rational` does not read is still a decimal, not an exact value
    ("approximations", r"\frac13", "0.333333333", True, None),
    ("approximations", r"\frac17", "0.142857143", True, None),
    ("approximations", r"\frac13", "0.343333333", False, None),
    ("approximations", r"\frac{2}{3}", "0.67", False, "Give your answer to three decimal places."),
    # fewer than three significant digits approximate nothing; 22/7 rounds to 3.14 as pi does (docs/grading.md)
    ("approximations", r"\pi", "3.14", True, None),
    ("approximations", r"\pi", "3.1", False, None),
    ("approximations", r"\frac{10}{3}", "3.33", True, None),
    ("approximations", r"\frac{10}{3}", "3.3", False, None),
    ("approximations", r"\frac{2\pi}{3}", "2.09", True, None),
    ("approximations", r"\frac{2\pi}{3}", "2.1", False, None),
    ("approximations", r"\frac{22}{7}", "3.14", True, None),
    # a problem asking for an exact form takes no approximation
    ("approximations", r"\frac{1}{3}", r"\frac{1}{3}", True, f"What is the probability? {FRACTION}"),
    ("approximations", r"\frac{1}{3}", "0.33", False, f"What is the probability? {FRACTION}"),
    ("approximations", r"\frac{1}{3}", "0.333", False, f"What is the probability? {FRACTION}"),
    ("approximations", r"\frac{22}{7}", "3.14", False, f"What is the ratio? {FRACTION}"),
    ("approximations", r"\frac{\pi}{3}", r"\pi/3", True, "Find the area. Express your answer in terms of $\\pi$."),
    ("approximations", r"\frac{\pi}{3}", "1.05", False, "Find the area. Express your answer in terms of $\\pi$."),
    ("approximations", r"\frac{\pi}{3}", "1.047", False, "Find the area. Express your answer in terms of $\\pi$."),
    ("approximations", r"2\sqrt{2}", r"2\sqrt2", True, "Express your answer in simplest radical form."),
    ("approximations", r"2\sqrt{2}", "2.83", False, "Express your answer in simplest radical form."),
    ("approximations", r"\sqrt{3}", "1.732", False, "Find the exact value of the height."),
    ("approximations", r"\frac{2}{3}", "0.667", True, "Give your answer to three decimal places."),
    # ---- a response that runs on into a new turn
    ("turn markers", "84", QWEN, True, None),
    ("turn markers", "360", QWEN, False, None),
    ("turn markers", "12", R1, True, None),
    ("turn markers", "20", R1, False, None),
    ("turn markers", "7", LLAMA, True, None),
    ("turn markers", "9", LLAMA, False, None),
    ("turn markers", "15", HUMAN, True, None),
    ("turn markers", "20", HUMAN, False, None),
    ("turn markers", "6", USER, True, None),
    ("turn markers", "8", USER, False, None),
    ("turn markers", "3", INSTRUCTION, True, None),
    ("turn markers", "7", INSTRUCTION, False, None),
    ("turn markers", "5", "We try cases and none works.<|im_start|>user\nThe answer is $5$.", False, None),
    ("turn markers", "45", ECHO, True, TRAIN),
    ("turn markers", "60", ECHO, False, TRAIN),
    ("turn markers", "45", THINK, True, TRAIN),
    ("turn markers", "40", THINK, False, TRAIN),
    # ---- the last stated value, no box and no answer phrase (final_answer)
    ("last stated value", r"\frac{3}{4}", W + "The two events are independent.\n\nFinal: \\( 3/4 \\)", True, None),
    ("last stated value", r"\frac{3}{4}", W + "The two events are independent.\n\nFinal: \\( 4/3 \\)", False, None),
    (
        "last stated value",
        r"x \neq 5",
        W + "The denominator vanishes only at $x=5$, so we get $x \\neq 5$.",
        True,
        None,
    ),
    (
        "last stated value",
        r"x \neq 5",
        W + "The denominator vanishes only at $x=5$, so we get $x \\neq 6$.",
        False,
        None,
    ),
    ("last stated value", "1204.50", W + "Adding the three invoices, the total is 1,204.50€.", True, None),
    ("last stated value", "1204.50", W + "Adding the three invoices, the total is 1,240.50€.", False, None),
    ("last stated value", "18", W + "Each of the 6 crates holds 3 melons, which makes 18 melons.", True, None),
    ("last stated value", "18", W + "Each of the 6 crates holds 3 melons, which makes 21 melons.", False, None),
    (
        "last stated value",
        r"\begin{pmatrix}2&1\\0&3\end{pmatrix}",
        W + "Multiplying out, the product is:\n$$\\begin{pmatrix}2&1\\\\0&3\\end{pmatrix}$$",
        True,
        None,
    ),
    (
        "last stated value",
        r"\begin{pmatrix}2&1\\0&3\end{pmatrix}",
        W + "Multiplying out, the product is:\n$$\\begin{pmatrix}2&0\\\\1&3\\end{pmatrix}$$",
        False,
        None,
    ),
    ("last stated value", "12", W + "She pays $\\$4$ per ticket for 3 tickets, so she spends $12.", True, None),
    ("last stated value", "12", W + "Perhaps she spends $12.", False, None),
    ("last stated value", "12", W + "She spends at least $12$.", False, None),
    ("last stated value", "12", W + "She spends $12$ or $13$.", False, None),
    ("last stated value", "12", W + "Does she spend $12$?", False, None),
    ("last stated value", "12", W + "Wait, she spends $12$.", False, None),
    ("last stated value", "12", W + "Let me compute $3 \\cdot 4 = 12$", False, None),
    # a closing value its sentence rejects, excepts, bounds, exemplifies or only nears is no answer
    ("last stated value", "12", W + "We reject $x = 12$.", False, None),
    ("last stated value", "12", W + "We discard $x = 12$.", False, None),
    ("last stated value", "12", W + "The extraneous root is $12$.", False, None),
    ("last stated value", "12", W + "The wrong value is $12$.", False, None),
    ("last stated value", "12", W + "The incorrect value is $12$.", False, None),
    ("last stated value", "12", W + "An invalid value is $12$.", False, None),
    ("last stated value", "12", W + "The value $x = 12$ fails.", False, None),
    ("last stated value", "12", W + "So $x = 12$ is ruled out: $12$.", False, None),
    ("last stated value", "12", W + "Except $12$.", False, None),
    ("last stated value", "12", W + "Excluding $x = 12$.", False, None),
    ("last stated value", "12", W + "An upper bound is $12$.", False, None),
    ("last stated value", "12", W + "A lower bound is $12$.", False, None),
    ("last stated value", "12", W + "For example, $12$.", False, None),
    ("last stated value", "12", W + "For instance, $12$.", False, None),
    ("last stated value", "12", W + "E.g. $12$.", False, None),
    ("last stated value", "12", W + "Such as $12$.", False, None),
    ("last stated value", "12", W + "Hint: consider $12$.", False, None),
    ("last stated value", "12", W + "The total is nearly $12$.", False, None),
    ("last stated value", "12", W + "The total is almost $12$.", False, None),
    ("last stated value", "-1", W + "Thus $x = 3$ is extraneous, so the only solution is $x = -1$.", True, None),
    ("last stated value", "3", W + "Thus $x = 3$ is extraneous, so the only solution is $x = -1$.", False, None),
    # a number after a reference noun, an imperative or a setup line is no answer
    ("last stated value", "7", W + "Thus the area is $24$. This was problem 7.", False, None),
    ("last stated value", "5", W + "Problem 5.", False, None),
    ("last stated value", "5", W + "I hope this helps! Rating: 5.", False, None),
    ("last stated value", "4096", W + "Total tokens used: 4096.", False, None),
    ("last stated value", "2", W + "See Theorem 2.", False, None),
    ("last stated value", "3", W + "I used step 3.", False, None),
    ("last stated value", "3", W + "We simplify the expression using equation 3.", False, None),
    ("last stated value", "5", W + "This solution took 5 minutes.", False, None),
    ("last stated value", "10", W + "We consider 10 cases.", False, None),
    ("last stated value", "5", W + "Compute $2+3$.", False, None),
    ("last stated value", "5", W + "Given: $x=5$.", False, None),
    ("last stated value", "5", W + "Set $x = 5$.", False, None),
    ("last stated value", "12", W + "Define $n = 12$.", False, None),
    ("last stated value", "3", W + "Consider $x = 3$.", False, None),
    ("last stated value", "0", W + "Assume $x > 0$.", False, None),
    ("last stated value", "3", W + "We claim $x=3$.", False, None),
    ("last stated value", "3", W + "It remains to show $x=3$.", False, None),
    ("last stated value", "3.14", W + "Recall that $\\pi \\approx 3.14$.", False, None),
    ("last stated value", "12", W + "This gives us the equation $x+3=12$.", False, None),
    ("last stated value", "15", W + "It drains 120 / 8 litres a minute, so it takes 15 minutes.", True, None),
    # ---- dataset answer lines
    ("dataset lines", "18", "Tom has 6 + 12 = 18 stickers.\nA: 18", True, None),
    ("dataset lines", "18", "Tom has 6 + 12 = 18 stickers.\nA: 19", False, None),
    ("dataset lines", "8", "She keeps 16 / 2 = 8 of them. #### 8", True, None),
    ("dataset lines", "8", "She keeps 16 / 2 = 8 of them. #### 9", False, None),
    ("dataset lines", "1250", "The shop earns 25 * 50 = 1250 dollars.\n#### 1,250", True, None),
    ("dataset lines", "1250", "The shop earns 25 * 50 = 1250 dollars.\n#### 1,520", False, None),
    # `A:` only as the last line, never in a lettered list; a few-shot `Q:` after an answer is a new turn
    ("dataset lines", "18", "Tom has 6 + 12 = 18 stickers.\nA: 18\nQ: What is 2+2?\nA: 4", True, None),
    ("dataset lines", "4", "Tom has 6 + 12 = 18 stickers.\nA: 18\nQ: What is 2+2?\nA: 4", False, None),
    ("dataset lines", "12", "The choices are:\nA: 12\nB: 18\nC: 24", False, None),
    ("dataset lines", "3", "Let me label the points.\nA: 3\nB: 5", False, None),
    # ---- a bare braced gold over several boxes
    ("braced-set gold", "{1,2,3}", W + "So the roots are $\\boxed{1}, \\boxed{2}, \\boxed{3}$.", True, None),
    ("braced-set gold", "{1,2,3}", W + "So the roots are $\\boxed{3}$, $\\boxed{1}$ and $\\boxed{2}$.", True, None),
    ("braced-set gold", "{1,2,3}", W + "So the roots are $\\boxed{1}, \\boxed{2}, \\boxed{4}$.", False, None),
    ("braced-set gold", "{1,2,3}", W + "So the roots are $\\boxed{1}$ and $\\boxed{2}$.", False, None),
    ("braced-set gold", "{-1, 4}", W + "Both $\\boxed{4}$ and $\\boxed{-1}$ satisfy it.", True, None),
    ("braced-set gold", "{-1, 4}", W + "Both $\\boxed{4}$ and $\\boxed{1}$ satisfy it.", False, None),
    # ---- equations and labelled forms
    ("equation pairs", "(3,1),(4,1)", "m=3,n=1; m=4,n=1", True, None),
    ("equation pairs", "(3,1),(4,1)", "m=3,n=1; m=4,n=2", False, None),
    ("equation pairs", "(3,1),(4,1)", "n=3,m=1; n=4,m=1", False, None),
    ("equation pairs", "(2,5),(5,2)", r"a=5, b=2 \text{ or } a=2, b=5", True, None),
    ("equation pairs", "(2,5),(5,2)", r"a=5, b=2 \text{ or } a=2, b=2", False, None),
    ("equation pairs", "-5,2,7", r"k=2,\,-5,\,7", True, None),
    ("equation pairs", "-5,2,7", r"k=2,\,-5,\,8", False, None),
    ("equation pairs", "-5,2,7", r"k=2,\,-5", False, None),
    ("equation pairs", "g(t) = 5t - 1", "y = 5t - 1", True, None),
    ("equation pairs", "g(t) = 5t - 1", "y = 5t + 1", False, None),
    ("equation pairs", "h(x) = x^2 - 4", "y = x^2 - 4", True, None),
    ("equation pairs", "h(x) = x^2 - 4", "y = x^2 + 4", False, None),
    # the inverse relation is no name for the function
    ("equation pairs", "f(x) = 2x+1", "y = 2x+1", True, None),
    ("equation pairs", "f(x) = 2x+1", "x = 2y+1", False, None),
    ("equation pairs", "f(x) = x^2", "x = y^2", False, None),
    ("equation pairs", "g(t) = 5t - 1", "t = 5s - 1", False, None),
]
