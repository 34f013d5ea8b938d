"""Reading an answer: the final answer of a response, as text. This stage holds the `boxed` and `final_answer`
policies (answers), the boxes that make one answer (pairing), an unboxed answer statement (statement, assertion), and
the bracket and number syntax the later stages share (brackets, numbers). Text only, no verdicts but the exact ones.
See docs/grading.md#extraction-policies.
"""
