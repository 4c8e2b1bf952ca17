"""What the bundled sample rows of B4 (Mixture-of-Thoughts) and B5 (OpenThoughts) say. Topics are plausible and
varied; the tiny demo model's text is meaningless anyway."""

from __future__ import annotations


def b4_content() -> list[tuple]:
    """Mixture-of-Thoughts (math): (question, reasoning, answer, source). One question is stored
    as a list of text parts (the non-string-content pitfall; the adapter joins the parts)."""
    S1, S2 = "open-r1/OpenR1-Math-220k", "numina_math"
    return [
        ("What is the sum of the first 20 positive odd integers?", "The sum of the first n odd numbers is n^2, so 20^2 = 400.", "The sum is $\\boxed{400}$.", S1),
        ("Find all real x such that 2x + 7 = 3x - 5.", "Subtract 2x: 7 = x - 5, so x = 12.", "$x = \\boxed{12}$", S1),
        ("A rectangle has perimeter 30 and length twice its width. What is its area?", "2(l + w) = 30 and l = 2w give 6w = 30, w = 5, l = 10, area 50.", "The area is $\\boxed{50}$.", S2),
        ("How many positive divisors does 360 have?", "360 = 2^3 * 3^2 * 5, so (3+1)(2+1)(1+1) = 24.", "$\\boxed{24}$", S1),
        ("Compute $\\lim_{x \\to 0} \\frac{\\sin 3x}{x}$.", "sin(3x)/x = 3 * sin(3x)/(3x), which tends to 3.", "The limit is $\\boxed{3}$.", S1),
        ("Solve for x: $\\log_2 (x + 1) = 5$.", "x + 1 = 2^5 = 32, so x = 31.", "$x = \\boxed{31}$", S2),
        ("What is the remainder when $7^{100}$ is divided by 5?", "7 ≡ 2 mod 5; powers of 2 cycle 2,4,3,1 with period 4; 100 ≡ 0 mod 4, so the remainder is 1.", "$\\boxed{1}$", S1),
        ("A fair die is rolled twice. What is the probability that the sum is 7?", "Six ordered pairs out of 36 give 7: 6/36 = 1/6.", "$\\boxed{\\tfrac{1}{6}}$", S1),
        ("Find the area of a triangle with vertices (0,0), (4,0) and (0,3).", "A right triangle with legs 4 and 3: area = 4*3/2 = 6.", "The area is $\\boxed{6}$.", S2),
        ("How many ways can 5 books be arranged on a shelf if two particular books must be adjacent?", "Glue the pair: 4! arrangements times 2 orders = 48.", "$\\boxed{48}$", S1),
        ("If $f(x) = 3x^2 - 2x + 1$, what is $f'(2)$?", "f'(x) = 6x - 2, so f'(2) = 10.", "$f'(2) = \\boxed{10}$", S1),
        ("The arithmetic sequence 3, 7, 11, ... has which 25th term?", "a_n = 3 + 4(n - 1); a_25 = 3 + 96 = 99.", "$\\boxed{99}$", S2),
        ("Find the greatest common divisor of 252 and 198.", "252 - 198 = 54; 198 mod 54 = 36; 54 mod 36 = 18; 36 mod 18 = 0. GCD 18.", "$\\boxed{18}$", S1),
        ("What is $\\int_0^1 (3x^2 + 2x)\\,dx$?", "Antiderivative x^3 + x^2; from 0 to 1 gives 2.", "$\\boxed{2}$", S1),
        ("Solve the system x + y = 10, x - y = 4.", "Adding gives 2x = 14, x = 7, then y = 3.", "$(x, y) = \\boxed{(7, 3)}$", S2),
        ("A circle has circumference $10\\pi$. What is its area?", "2πr = 10π gives r = 5; area 25π.", "The area is $\\boxed{25\\pi}$.", S1),
        ("How many integers between 1 and 100 inclusive are divisible by 3 or 5?", "33 + 20 - 6 = 47 by inclusion-exclusion.", "$\\boxed{47}$", S1),
        ("Find the minimum value of $x^2 - 6x + 13$.", "Complete the square: (x - 3)^2 + 4, minimum 4 at x = 3.", "$\\boxed{4}$", S2),
        ("What is the units digit of $3^{2023}$?", "Units digits of powers of 3 cycle 3,9,7,1; 2023 ≡ 3 mod 4, so the digit is 7.", "$\\boxed{7}$", S1),
        ("A bag has 4 red and 6 blue marbles. Two are drawn without replacement. What is the probability both are red?", "(4/10)(3/9) = 12/90 = 2/15.", "$\\boxed{\\tfrac{2}{15}}$", S1),
        ("Simplify $\\sqrt{50} + \\sqrt{18}$.", "5√2 + 3√2 = 8√2.", "$\\boxed{8\\sqrt{2}}$", S2),
        ("Find x if $3^{x+1} = 81$.", "81 = 3^4 so x + 1 = 4 and x = 3.", "$x = \\boxed{3}$", S1),
        ("How many diagonals does a convex decagon have?", "n(n - 3)/2 = 10*7/2 = 35.", "$\\boxed{35}$", S1),
        ("The sum of two numbers is 12 and their product is 35. What is the sum of their squares?", "(a + b)^2 - 2ab = 144 - 70 = 74.", "$\\boxed{74}$", S2),
        ("Evaluate $\\binom{8}{3}$.", "8*7*6/6 = 56.", "$\\boxed{56}$", S1),
        ("A train travels 180 km in 2.5 hours. What is its average speed in km/h?", "180 / 2.5 = 72.", "$\\boxed{72}$ km/h", S1),
        ("What is the smallest positive integer n such that n! is divisible by 1000?", "Need three factors of 5 (and of 2): 15! has 5, 10, 15, so n = 15; 14! has only two.", "$\\boxed{15}$", S2),
        ([{"type": "text", "text": "Let a and b be the roots of $x^2 - 5x + 6 = 0$."},
          {"type": "text", "text": "Compute $a^2 + b^2$."}],
         "a + b = 5 and ab = 6, so a^2 + b^2 = 25 - 12 = 13.", "$\\boxed{13}$", S1),
    ]


SKY_T1_SYSTEM = (
    "Your role as an assistant involves thoroughly exploring questions through a systematic long thinking "
    "process before providing the final precise and accurate solutions. This requires engaging in a "
    "comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracing, and "
    "iteration to develop well-considered thinking process. Please structure your response into two main "
    "sections: Thought and Solution. In the Thought section, detail your reasoning process using the specified "
    "format: <|begin_of_thought|> {thought with steps separated with '\\n\\n'} <|end_of_thought|> Each step "
    "should include detailed considerations such as analyzing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The solution should "
    "remain a logical, accurate, concise expression style and detail necessary steps needed to reach the "
    "conclusion, formatted as follows: <|begin_of_solution|> {final formatted, precise, and clear solution} "
    "<|end_of_solution|> Now, try to solve the following question through the above guidelines:"
)


_BOXED = "Return your final response within \\boxed{}. "


_CODE = ("Generate an executable Python function generated from the given prompt. The function should take "
         "stdin as input and print the output. Simply call the function after the definition.")


def b5_content() -> dict:
    """OpenThoughts-114k: `system` is the Sky-T1 prompt (dropped by the adapter). Three questions
    are repeated (4, 4 and 3 times, with different responses), OpenThoughts3-style."""
    dup_a = _BOXED + "Find the number of ordered pairs of positive integers (a, b) with a + b = 20."
    dup_b = (_CODE + "You are given N integers. Print the number of distinct values among them.\n\n"
             "Input: N on the first line, then N integers.\nOutput: one integer.\n\nSample Input\n5\n1 2 2 3 3\n\n"
             "Sample Output\n3")
    dup_c = "Why does ice float on liquid water? Explain in terms of molecular structure."
    items = [
        (dup_a, "For each a from 1 to 19, b = 20 - a is positive. That gives 19 pairs.", "\\boxed{19}"),
        (dup_a, "a can be any of 1..19; a = 20 would make b = 0, which is not positive. So 19.", "\\boxed{19}"),
        (dup_a, "Stars and bars: positive solutions of a + b = 20 number C(19, 1) = 19.", "\\boxed{19}"),
        (dup_a, "List small cases: a + b = 3 has 2 pairs, a + b = 4 has 3; in general n - 1. So 19.", "\\boxed{19}"),
        (dup_b, "Read the numbers and put them in a set; its size is the answer.",
         "```python\ndef main():\n    import sys\n    d = sys.stdin.read().split()\n    print(len(set(d[1:])))\n\nmain()\n```"),
        (dup_b, "Sorting and counting changes also works, but a set is simpler.",
         "```python\ndef main():\n    n = int(input())\n    print(len(set(input().split())))\n\nmain()\n```"),
        (dup_b, "Careful: the numbers might span lines, so read all tokens.",
         "```python\nimport sys\n\ndef solve():\n    t = sys.stdin.read().split()\n    n = int(t[0])\n    print(len(set(t[1:n + 1])))\n\nsolve()\n```"),
        (dup_b, "Use a dict to count values, then print the number of keys.",
         "```python\ndef main():\n    n = int(input())\n    c = {}\n    for x in input().split():\n        c[x] = c.get(x, 0) + 1\n    print(len(c))\n\nmain()\n```"),
        (dup_c, "Hydrogen bonds in ice lock molecules into an open hexagonal lattice, which takes more space than the liquid.",
         "Ice is less dense than water because its hydrogen-bonded lattice is open, so it floats."),
        (dup_c, "Density decides floating. In the liquid, hydrogen bonds constantly break and molecules pack closer.",
         "The crystal lattice of ice holds molecules farther apart than in liquid water, so ice is about 9% less dense."),
        (dup_c, "Compare densities: ice about 0.92 g/cm^3, water about 1.00 g/cm^3.",
         "Hydrogen bonding forces an open tetrahedral arrangement in ice, lowering its density below water's."),
        (_BOXED + "What is the largest prime factor of 221?", "221 = 13 * 17, so the largest prime factor is 17.", "\\boxed{17}"),
        (_BOXED + "Solve for x: 5x - 3 = 2x + 9.", "3x = 12, so x = 4.", "\\boxed{4}"),
        (_BOXED + "How many subsets of {1, 2, 3, 4, 5} contain the element 3?", "Fix 3; the other 4 elements are free: 2^4 = 16.", "\\boxed{16}"),
        (_BOXED + "A square has diagonal 10. What is its area?", "Area = d^2 / 2 = 50.", "\\boxed{50}"),
        (_BOXED + "Find the sum of the interior angles of a hexagon in degrees.", "(n - 2) * 180 = 720.", "\\boxed{720}"),
        (_BOXED + "If 3 pencils cost 45 cents, how much do 7 pencils cost in cents?", "One pencil costs 15 cents, so 7 cost 105.", "\\boxed{105}"),
        (_BOXED + "What is the value of 1 + 2 + ... + 50?", "50 * 51 / 2 = 1275.", "\\boxed{1275}"),
        (_CODE + "Given a string S, print it reversed.\n\nSample Input\nabc\n\nSample Output\ncba",
         "Slicing with step -1 reverses a string.", "```python\ndef main():\n    print(input()[::-1])\n\nmain()\n```"),
        (_CODE + "Given two integers A and B, print their product if it is even, else print Odd.\n\nSample Input\n3 4\n\nSample Output\n12",
         "A product is even when either factor is even.",
         "```python\ndef main():\n    a, b = map(int, input().split())\n    p = a * b\n    print(p if p % 2 == 0 else 'Odd')\n\nmain()\n```"),
        (_CODE + "Print the number of vowels in a lowercase string S.\n\nSample Input\nbanana\n\nSample Output\n3",
         "Count characters in 'aeiou'.", "```python\ndef main():\n    print(sum(c in 'aeiou' for c in input()))\n\nmain()\n```"),
        ("What is the role of mitochondria in a eukaryotic cell?",
         "Mitochondria run cellular respiration and produce most ATP.", "They generate ATP through oxidative phosphorylation."),
        ("Why is the sky blue during the day?", "Rayleigh scattering is stronger for short wavelengths.",
         "Air molecules scatter blue light much more than red, so scattered skylight looks blue."),
        ("What happens to the boiling point of water at high altitude, and why?", "Lower air pressure means the vapor pressure matches it at a lower temperature.",
         "It drops, because the lower atmospheric pressure is reached at a lower temperature."),
        ("Explain why a metal spoon feels colder than a wooden one at the same temperature.", "Metal conducts heat away from the skin faster.",
         "Metals have higher thermal conductivity, so they draw heat from your hand faster."),
        ("What distinguishes an exothermic reaction from an endothermic one?", "Sign of the enthalpy change.",
         "Exothermic reactions release heat (negative ΔH); endothermic reactions absorb it (positive ΔH)."),
        (_BOXED + "The ratio of boys to girls in a class is 3:5. If there are 40 students, how many are girls?", "Girls are 5/8 of 40 = 25.", "\\boxed{25}"),
        (_BOXED + "Compute 2^10 - 10^2.", "1024 - 100 = 924.", "\\boxed{924}"),
        (_BOXED + "Find the number of trailing zeros in 100!.", "100/5 + 100/25 = 20 + 4 = 24.", "\\boxed{24}"),
        ("Why do heavier and lighter objects fall at the same rate in a vacuum?", "Gravitational force scales with mass, and so does inertia.",
         "Acceleration is F/m = g for every mass, so without air resistance all objects fall equally fast."),
    ]
    return {"system": SKY_T1_SYSTEM, "items": items}
