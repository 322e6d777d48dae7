"""Deterministic synthetic data for the tiny GLM-5: what the model is taught.

Every sample is a list of (text, weight) segments; the weights are the loss
weights of the segment's tokens (answers 1, prompts PROMPT_WEIGHT, so that the
model is a language model of the whole text but spends its capacity on what
it is asked to produce). Segments split only at special tokens, so tokenizing
them one by one gives the same ids as tokenizing the whole text.

Tasks:
  count   plain text (no chat template): counting and simple sequences.
  arith   chat: addition and subtraction of 1-3 digit numbers; with thinking the
          reasoning works column by column inside <think>...</think>.
  tools   chat with OpenAI-style tools rendered as GLM-5's template does: a tool
          call in GLM-5's XML form, the tool's answer, a reply that uses it.
  copy    chat: repeat a random sequence of numbers, words or names.
  recall  chat: a few hundred "key: value" lines, then a question about one key
          (and sometimes follow-up questions about others).
  chat    greetings and small talk, with and without tools.

Chat text is rendered exactly as GLM-5's chat template renders it (checked
against the template in test_data.py). Held-out items (arithmetic problems,
cities, time zones, ...) are never generated for training; eval() draws only
from them.
"""
import json
import random
import zlib

PROMPT_WEIGHT = 0.2

GMASK = "[gMASK]<sop>"
SYSTEM, USER, ASSISTANT, OBSERVATION = "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"

SPECIAL_TOKENS = [
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
    "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
    "/nothink",
]

TOOLS_HEADER = (SYSTEM + "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n")
TOOLS_FOOTER = ("</tools>\n\nFor each function call, output the function name and arguments within the following "
                "XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}"
                "</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>")


def held_out(*key):
    """One item in 8 is held out of training (for the evaluation sets)."""
    return zlib.crc32(repr(key).encode()) % 8 == 0


# ---------------------------------------------------------------- rendering

def render(messages, tools=None, add_generation_prompt=False, enable_thinking=True, keep_reasoning=True):
    """GLM-5's chat template as segments. What an assistant writes gets weight
    1: its turn after the generation prompt, and the <|user|> or
    <|observation|> that ends it (appended after a final assistant turn).
    keep_reasoning is the template's clear_thinking=false (glmrun's default)."""
    segs = []
    p = GMASK
    if tools:
        p += TOOLS_HEADER + "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tools) + TOOLS_FOOTER
    segs.append((p, PROMPT_WEIGHT))
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    prev = None
    for i, m in enumerate(messages):
        r = m["role"]
        opener_w = 1.0 if prev == "assistant" else PROMPT_WEIGHT
        if r == "system":
            segs.append((SYSTEM + m["content"], PROMPT_WEIGHT))
        elif r == "user":
            segs += [(USER, opener_w), (m["content"], PROMPT_WEIGHT)]
        elif r == "tool":
            if prev != "tool":
                segs.append((OBSERVATION, opener_w))
            segs.append(("<tool_response>" + m["content"] + "</tool_response>", PROMPT_WEIGHT))
        elif r == "assistant":
            reasoning = m.get("reasoning", "")
            if (keep_reasoning or i > last_user) and reasoning:
                segs += [(ASSISTANT + "<think>", PROMPT_WEIGHT), (reasoning.strip() + "</think>", 1.0)]
            else:
                segs.append((ASSISTANT + "</think>", PROMPT_WEIGHT))
            a = m.get("content", "").strip()
            for tc in m.get("tool_calls", []):
                a += "<tool_call>" + tc["name"]
                for k, v in tc["arguments"].items():
                    a += "<arg_key>" + k + "</arg_key><arg_value>" + (
                        v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) + "</arg_value>"
                a += "</tool_call>"
            segs.append((a, 1.0))
        else:
            raise ValueError(r)
        prev = r
    if add_generation_prompt:
        segs.append((ASSISTANT + ("<think>" if enable_thinking else "</think>"), PROMPT_WEIGHT))
    elif prev == "assistant":
        segs.append((OBSERVATION if messages[-1].get("tool_calls") else USER, 1.0))
    return [(s, w) for s, w in segs if s]


def text_of(segs):
    return "".join(s for s, _ in segs)


# ---------------------------------------------------------------- vocabulary of the world

SYL = ["ka", "lo", "mi", "ra", "ven", "tor", "sa", "li", "bar", "del", "mon", "ta", "ri", "no", "vi", "ga",
       "pel", "dor", "an", "es", "ur", "bel", "cas", "fen", "gri", "hal", "jor", "kel", "lun", "mar", "nor",
       "os", "pra", "quil", "ros", "sel", "tam", "ul", "var", "wen", "zan", "ber", "cor", "dal", "el", "fir"]

CITIES = ["Lisbon", "Paris", "Berlin", "Madrid", "Rome", "Vienna", "Prague", "Warsaw", "Oslo", "Stockholm",
          "Helsinki", "Dublin", "London", "Amsterdam", "Brussels", "Zurich", "Geneva", "Athens", "Istanbul",
          "Cairo", "Nairobi", "Lagos", "Accra", "Casablanca", "Tunis", "Johannesburg", "Cape Town", "Dubai",
          "Doha", "Riyadh", "Tehran", "Karachi", "Mumbai", "Delhi", "Bangalore", "Chennai", "Kolkata", "Dhaka",
          "Colombo", "Kathmandu", "Bangkok", "Hanoi", "Jakarta", "Manila", "Singapore", "Kuala Lumpur",
          "Seoul", "Busan", "Tokyo", "Osaka", "Kyoto", "Beijing", "Shanghai", "Shenzhen", "Hong Kong", "Taipei",
          "Sydney", "Melbourne", "Perth", "Auckland", "Wellington", "Toronto", "Montreal", "Vancouver",
          "Chicago", "Boston", "Seattle", "Denver", "Austin", "Miami", "Atlanta", "Houston", "Dallas",
          "Phoenix", "Portland", "New York", "Los Angeles", "San Francisco", "Mexico City", "Lima", "Bogota",
          "Quito", "Santiago", "Buenos Aires", "Montevideo", "Sao Paulo", "Rio de Janeiro", "Havana",
          "Reykjavik", "Copenhagen", "Hamburg", "Munich", "Milan", "Naples", "Porto", "Seville", "Valencia",
          "Barcelona", "Lyon", "Marseille", "Krakow", "Budapest", "Bucharest", "Sofia", "Belgrade", "Zagreb",
          "Riga", "Vilnius", "Tallinn", "Kyiv", "Tbilisi", "Yerevan", "Baku", "Almaty", "Tashkent", "Ulaanbaatar"]

REGIONS = ["Europe", "Asia", "America", "Africa", "Australia", "Pacific", "Atlantic"]
UTC_OFFSETS = [f"UTC{s}{h}" for s in "+-" for h in range(1, 13)]

CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "foggy", "snowy", "clear", "stormy"]

UNITS = [  # (code, singular, plural, family)
    ("km", "kilometer", "kilometers", "length"), ("mi", "mile", "miles", "length"),
    ("m", "meter", "meters", "length"), ("ft", "foot", "feet", "length"),
    ("kg", "kilogram", "kilograms", "mass"), ("lb", "pound", "pounds", "mass"),
    ("g", "gram", "grams", "mass"), ("oz", "ounce", "ounces", "mass"),
    ("l", "liter", "liters", "volume"), ("gal", "gallon", "gallons", "volume"),
    ("c", "degree Celsius", "degrees Celsius", "temp"), ("f", "degree Fahrenheit", "degrees Fahrenheit", "temp"),
]
TO_SI = {"km": 1000, "mi": 1609.344, "m": 1, "ft": 0.3048, "kg": 1, "lb": 0.45359237, "g": 0.001,
         "oz": 0.028349523, "l": 1, "gal": 3.785411784}

FIRST_NAMES = ["anna", "ben", "carla", "dev", "elif", "femi", "gita", "hugo", "ines", "jon", "kira", "liam",
               "mei", "nora", "omar", "pia", "quinn", "rosa", "sami", "tara", "umar", "vera", "wen", "yusuf", "zoe"]
TOPICS = ["budget", "meeting", "report", "trip", "invoice", "schedule", "launch", "review", "party", "update"]
SEARCH_TOPICS = ["tide tables", "bread recipes", "bike repair", "chess openings", "tea history", "moon phases",
                 "river maps", "bird songs", "knot tying", "star charts", "solar panels", "paper planes"]

TOOLS = {
    "get_weather": {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    "get_time": {"type": "function", "function": {
        "name": "get_time", "description": "Get the current local time in a time zone.",
        "parameters": {"type": "object", "properties": {
            "timezone": {"type": "string", "description": "IANA zone such as Europe/Paris, or an offset such as UTC+2"}},
            "required": ["timezone"]}}},
    "convert_units": {"type": "function", "function": {
        "name": "convert_units", "description": "Convert a value from one unit to another.",
        "parameters": {"type": "object", "properties": {
            "value": {"type": "number"},
            "from_unit": {"type": "string", "description": "Unit code: km, mi, m, ft, kg, lb, g, oz, l, gal, c, f"},
            "to_unit": {"type": "string", "description": "Unit code: km, mi, m, ft, kg, lb, g, oz, l, gal, c, f"}},
            "required": ["value", "from_unit", "to_unit"]}}},
    "get_stock_price": {"type": "function", "function": {
        "name": "get_stock_price", "description": "Get the latest price of a stock.",
        "parameters": {"type": "object", "properties": {
            "symbol": {"type": "string", "description": "Ticker symbol"}},
            "required": ["symbol"]}}},
    "send_email": {"type": "function", "function": {
        "name": "send_email", "description": "Send a short email.",
        "parameters": {"type": "object", "properties": {
            "to": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["to", "subject"]}}},
    "search_web": {"type": "function", "function": {
        "name": "search_web", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}},
            "required": ["query"]}}},
}

# Words of the generator's own text that the tokenizer keeps whole (one
# token after a space): the copy task's distinct items, so that each token
# in the answer has one earlier occurrence to look back at.
COPY_WORDS = """about another answer answered arguments arithmetic asks assistant beginners bike bird borrow bread brief budget call celsius charts chat chess city clear cloudy code codes compute concise conversion convert count current degrees draft each eight eighteen eleven email fahrenheit feet fifteen find five foggy following format four fourteen friend friendly from function functions gallons grams help helpful history information invoice kilograms kilometers knot latest launch line list lists liters local long look mail many maps meeting meters miles minus model moon more much name near needed negate nine nineteen notes numbers offset online open openings ounces output page panels paper party phases plan planes plus politely pounds price provided query question rain raining rainy recipes repair report result review right river schedule search send sent seven seventeen share short signatures sixteen small snowy solar songs star stock stormy subject subtract such sunny symbol tables tags tell that these things thirteen three tide time timezone today tomorrow tool tools trading trained trip twelve twenty tying unit update user uses value values wants weather welcome when will windy with within work zone""".split()

SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a concise assistant.", "Answer briefly.",
                  "You are a friendly assistant that uses tools when needed."]


class Gen:
    """All the random choices of one stream of samples. split is "train" or
    "eval": training never produces a held-out item, eval only those."""

    def __init__(self, seed, split="train"):
        self.r = random.Random(seed)
        self.split = split

    def ok(self, *key):
        return held_out(*key) == (self.split == "eval")

    def pick(self, kind, draw):
        for _ in range(1000):
            v = draw()
            if self.ok(kind, v):
                return v
        raise RuntimeError("no item for " + kind)

    # --- items
    def synth_name(self):
        r = self.r
        return "".join(r.choice(SYL) for _ in range(r.randint(2, 3))).capitalize()

    def city(self):
        r = self.r
        return self.pick("city", lambda: r.choice(CITIES) if r.random() < 0.5 else self.synth_name())

    def timezone(self):
        r = self.r

        def draw():
            u = r.random()
            if u < 0.3:
                return r.choice(UTC_OFFSETS)
            c = r.choice(CITIES) if u < 0.65 else self.synth_name()
            return r.choice(REGIONS) + "/" + c.replace(" ", "_")
        return self.pick("tz", draw)

    def number(self):
        r = self.r
        d = r.choice([1, 2, 3])
        return r.randint(0 if d == 1 else 10 ** (d - 1), 10 ** d - 1)

    # --- tasks
    def count(self):
        r = self.r
        u = r.random()
        if u < 0.6:
            step = r.choice([1, 1, 1, 1, 2, 3, 5, 10, -1, -2])
            start = r.choice([0, 1, 1, 1, r.randint(0, 100), r.randint(0, 900)])
            if step < 0:
                start += r.randint(20, 60)
            n = r.randint(6, 40)
            xs = [start + i * step for i in range(n) if start + i * step >= 0]
            sep = r.choice([" ", " ", " ", ", "])
            return [(sep.join(map(str, xs)), 1.0)]
        seqs = [list("abcdefghijklmnopqrstuvwxyz"), list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
                ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"] * 3,
                ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                 "October", "November", "December"] * 2,
                ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
                 "twenty"]]
        s = r.choice(seqs)
        i = r.randint(0, max(0, len(s) - 6))
        j = r.randint(i + 5, len(s))
        return [(r.choice([" ", ", "]).join(s[i:j]), 1.0)]

    def arith_problem(self):
        r = self.r

        def draw():
            return (self.number(), r.choice("+-"), self.number())
        return self.pick("arith", draw)

    def arith_messages(self, prob, think=True):
        r = self.r
        a, op, b = prob
        word = {"+": ["+", "plus"], "-": ["-", "minus"]}[op]
        w = r.choice(word)
        q = r.choice([f"What is {a} {w} {b}?", f"Compute {a} {w} {b}.", f"{a} {op} {b} = ?",
                      f"Calculate {a} {w} {b}.", f"What's {a} {w} {b}?", f"How much is {a} {w} {b}?",
                      f"{a}{op}{b}", f"Please work out {a} {w} {b}."])
        res = a + b if op == "+" else a - b
        return q, arith_reasoning(a, op, b) if think else "", f"{a} {op} {b} = {res}"

    def arith(self):
        r = self.r
        msgs = []
        if r.random() < 0.2:
            msgs.append({"role": "system", "content": r.choice(SYSTEM_PROMPTS)})
        think = r.random() < 0.75
        keep = r.random() < 0.5
        for _ in range(1 if r.random() < 0.8 else 2):
            q, reasoning, ans = self.arith_messages(self.arith_problem(), think)
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "reasoning": reasoning, "content": ans}]
        return render(msgs, keep_reasoning=keep)

    def tool_request(self):
        """(tool name, user request, arguments, tool result, final answer, thought)."""
        r = self.r
        name = r.choice(list(TOOLS))
        if name == "get_weather":
            city = self.city()
            unit = r.choice([None, None, "celsius", "fahrenheit"])
            q = r.choice([f"What's the weather in {city}?", f"How is the weather in {city} today?",
                          f"Is it raining in {city} right now?", f"Tell me the weather for {city}.",
                          f"weather {city}"])
            args = {"city": city}
            if unit:
                q = q.rstrip(".?") + f", in {unit}?"
                args["unit"] = unit
            t = r.randint(-10, 35) if unit != "fahrenheit" else r.randint(14, 95)
            cond = r.choice(CONDITIONS)
            res = {"city": city, "temperature": t, "unit": unit or "celsius", "condition": cond}
            sym = "°F" if unit == "fahrenheit" else "°C"
            ans = f"It is {t} {sym} and {cond} in {city}."
            thought = f"The user wants the weather in {city}. I will call get_weather."
        elif name == "get_time":
            tz = self.timezone()
            q = r.choice([f"What time is it in {tz}?", f"What is the current time in the {tz} time zone?",
                          f"time in {tz}", f"Can you tell me the local time in {tz}?"])
            args = {"timezone": tz}
            hh, mm = r.randint(0, 23), r.randint(0, 59)
            res = {"timezone": tz, "time": f"{hh:02d}:{mm:02d}"}
            ans = f"It is {hh:02d}:{mm:02d} in {tz}."
            thought = f"The user asks for the time in {tz}. I will call get_time."
        elif name == "convert_units":
            fam = r.choice(["length", "length", "mass", "mass", "volume", "temp"])
            us = [u for u in UNITS if u[3] == fam]
            fu, tu = r.sample(us, 2)
            v = self.pick("value", lambda: r.choice([r.randint(1, 999), r.randint(1, 9999),
                                                      round(r.uniform(0.5, 500), 1)]))
            fw = fu[1] if v == 1 else fu[2]
            q = r.choice([f"Convert {v} {fw} to {tu[2]}.", f"How many {tu[2]} is {v} {fw}?",
                          f"What is {v} {fw} in {tu[2]}?", f"{v} {fw} to {tu[2]}"])
            args = {"value": v, "from_unit": fu[0], "to_unit": tu[0]}
            if fam == "temp":
                out = v * 9 / 5 + 32 if fu[0] == "c" else (v - 32) * 5 / 9
            else:
                out = v * TO_SI[fu[0]] / TO_SI[tu[0]]
            out = round(out, 2)
            res = {"value": out, "unit": tu[0]}
            ans = f"{v} {fw} is {out} {tu[2]}."
            thought = f"The user wants {v} {fw} in {tu[2]}. I will call convert_units."
        elif name == "get_stock_price":
            s = self.pick("sym", lambda: "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
                                                 for _ in range(r.randint(2, 4))))
            q = r.choice([f"What is the stock price of {s}?", f"How much is {s} trading at?",
                          f"price of {s} stock", f"Look up the share price for {s}."])
            args = {"symbol": s}
            p = round(r.uniform(1, 900), 2)
            res = {"symbol": s, "price": p, "currency": "USD"}
            ans = f"{s} is trading at {p} USD."
            thought = f"The user wants the price of {s}. I will call get_stock_price."
        elif name == "send_email":
            to = self.pick("mail", lambda: r.choice(FIRST_NAMES) + "@" + r.choice(
                ["example.com", "mail.org", self.synth_name().lower() + ".net"]))
            subj = r.choice(TOPICS) + " " + r.choice(["notes", "plan", "draft", "question", "today", "tomorrow"])
            q = r.choice([f"Send an email to {to} with the subject {subj}.",
                          f"Email {to} about \"{subj}\".", f"Please mail {to}, subject: {subj}"])
            args = {"to": to, "subject": subj}
            res = {"status": "sent", "to": to}
            ans = f"Done: the email to {to} with the subject \"{subj}\" has been sent."
            thought = f"The user wants to email {to}. I will call send_email."
        else:
            topic = r.choice(SEARCH_TOPICS) + r.choice(["", " for beginners", " near " + self.city()])
            q = r.choice([f"Search the web for {topic}.", f"Find information about {topic}.",
                          f"Look up {topic} online."])
            args = {"query": topic}
            hit = self.synth_name() + " " + r.choice(["Guide", "Notes", "Wiki", "Journal"])
            res = {"top_result": f"{hit}: a page about {topic}"}
            ans = f"The top result is {hit}, a page about {topic}."
            thought = f"The user wants a web search for {topic}. I will call search_web."
        return name, q, args, res, ans, thought

    def tool_set(self, name):
        r = self.r
        others = [n for n in TOOLS if n != name]
        ts = r.sample(others, r.randint(1, 3)) + [name]
        r.shuffle(ts)
        return [TOOLS[n] for n in ts]

    def tools(self):
        r = self.r
        name, q, args, res, ans, thought = self.tool_request()
        tools = self.tool_set(name)
        msgs = []
        if r.random() < 0.3:
            msgs.append({"role": "system", "content": r.choice(SYSTEM_PROMPTS)})
        think = r.random() < 0.75
        msgs.append({"role": "user", "content": q})
        msgs.append({"role": "assistant", "reasoning": thought if think else "",
                     "tool_calls": [{"name": name, "arguments": args}]})
        if r.random() < 0.85:
            msgs.append({"role": "tool", "content": json.dumps(res, ensure_ascii=False)})
            msgs.append({"role": "assistant", "reasoning": "The tool answered. I will report it." if think else "",
                         "content": ans})
        return render(msgs, tools=tools, keep_reasoning=r.random() < 0.5)

    def recall_list(self, n):
        r = self.r
        keys = set()
        while len(keys) < n:
            keys.add("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 5))))
        # sorted first: a set's order depends on the process's hash seed.
        keys = sorted(keys)
        r.shuffle(keys)
        return [(k, r.randint(100, 999)) for k in keys]

    def recall_messages(self, n, think=True):
        r = self.r
        kv = self.recall_list(n)
        k, v = r.choice(kv)
        body = r.choice(["Here is a list of codes.", "Remember these values.", "Data:"]) + "\n" + \
            "\n".join(f"{a}: {b}" for a, b in kv) + "\n" + \
            r.choice([f"What is the value of {k}?", f"What is the code for {k}?", f"{k} = ?"])
        return body, (f"The line for {k} is {k}: {v}." if think else ""), f"The value of {k} is {v}.", v

    def recall(self, max_lines=170):
        """Mostly short lists, where the look-up is learnt cheaply, and some
        long ones. Follow-up questions about other keys of the same list reuse
        its (costly) prompt for more answers."""
        r = self.r
        n = r.choice([r.randint(5, 30), r.randint(5, 30), r.randint(30, 90), r.randint(100, max_lines)])
        think = r.random() < 0.6
        body, reasoning, ans, _ = self.recall_messages(n, think)
        msgs = [{"role": "user", "content": body}, {"role": "assistant", "reasoning": reasoning, "content": ans}]
        kv = dict(line.split(": ") for line in body.split("\n")[1:-1])
        for k in r.sample(sorted(kv), min(len(kv), r.choice([0, 1, 2, 3]))):
            q = r.choice([f"And {k}?", f"What is the value of {k}?", f"{k} = ?"])
            msgs += [{"role": "user", "content": q},
                     {"role": "assistant", "reasoning": f"The line for {k} is {k}: {kv[k]}." if think else "",
                      "content": f"The value of {k} is {kv[k]}."}]
        return render(msgs, keep_reasoning=r.random() < 0.5)

    def copy(self):
        """Repeating a random sequence: the shortest way to the look-back-and-
        copy circuit (induction heads) that arithmetic, tool arguments and
        recall all need."""
        r = self.r
        u = r.random()
        n = r.randint(3, 40)
        if u < 0.5:
            # Distinct one-token words: each token in the answer has a single
            # earlier occurrence, the plain case of looking back and copying
            # what came after it.
            xs = r.sample(COPY_WORDS, n)
            seq = " ".join(xs)
            q = r.choice(["Repeat after me: ", "Copy this: ", "Say this again: ", "Repeat: "]) + seq
            return render([{"role": "user", "content": q}, {"role": "assistant", "content": seq}])
        elif u < 0.65:
            xs = [str(r.randint(0, 999)) for _ in range(n)]
        elif u < 0.8:
            xs = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 6))) for _ in range(n)]
        elif u < 0.9:
            xs = [self.synth_name() for _ in range(n)]
        else:
            xs = [r.choice(CITIES + FIRST_NAMES + TOPICS) for _ in range(n)]
        seq = r.choice([" ", ", ", " "]).join(xs)
        q = r.choice(["Repeat after me: ", "Copy this: ", "Say this again: ", "Repeat: "]) + seq
        return render([{"role": "user", "content": q}, {"role": "assistant", "content": seq}])

    def chat(self):
        r = self.r
        q, a = r.choice([("Hello!", "Hello! How can I help you today?"),
                         ("Hi", "Hi! What can I do for you?"),
                         ("Who are you?", "I am a small GLM model trained to count, do arithmetic, use tools "
                                          "and look things up in long lists."),
                         ("Thanks!", "You're welcome!"),
                         ("What can you do?", "I can add and subtract numbers, call tools such as weather, "
                                              "time and unit conversion, and find values in long lists.")])
        think = r.random() < 0.5
        msgs = [{"role": "user", "content": q},
                {"role": "assistant", "reasoning": "The user is chatting. I will answer politely." if think else "",
                 "content": a}]
        tools = self.tool_set(r.choice(list(TOOLS))) if r.random() < 0.3 else None
        return render(msgs, tools=tools)

    MIX = [("count", 0.12), ("copy", 0.10), ("arith", 0.36), ("tools", 0.22), ("recall", 0.16), ("chat", 0.04)]

    def sample(self):
        u = self.r.random()
        for name, p in self.MIX:
            u -= p
            if u < 0:
                return getattr(self, name)()
        return self.chat()


def arith_reasoning(a, op, b):
    """Column-by-column working, right to left. Each line ends with the
    digits of the result so far, so the final line holds the whole result."""
    lines = [f"{a} {op} {b}"]
    neg = False
    if op == "-" and a < b:
        lines.append(f"{a} < {b}, so I compute {b} - {a} and negate.")
        a, b, neg = b, a, True
    da, db = str(a)[::-1], str(b)[::-1]
    n = max(len(da), len(db))
    carry = 0
    part = ""
    for i in range(n):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        if op == "+":
            s = x + y + carry
            expr = f"{x} + {y}" + (" + 1" if carry else "") + f" = {s}"
            carry, d = divmod(s, 10)
        else:
            s = x - y - carry
            expr = f"{x} - {y}" + (" - 1" if carry else "") + f" = {s}"
            if s < 0:
                expr += f", borrow: {s + 10}"
                s += 10
                carry = 1
            else:
                carry = 0
            d = s
        part = str(d) + part
        lines.append(f"{expr}: {part}")
    if op == "+" and carry:
        part = "1" + part
        lines.append(f"carry 1: {part}")
    res = str(int(part))
    if neg:
        res = "-" + res
    lines.append(f"answer {res}")
    return "\n".join(lines)


def eval_sets(seed=12345):
    """Held-out evaluation problems: arithmetic, tool requests, recall."""
    g = Gen(seed, "eval")
    arith = []
    seen = set()
    while len(arith) < 200:
        p = g.arith_problem()
        if p in seen:
            continue
        seen.add(p)
        q, _, ans = g.arith_messages(p)
        a, op, b = p
        arith.append({"question": q, "answer": a + b if op == "+" else a - b})
    tools = []
    for _ in range(100):
        name, q, args, res, ans, _ = g.tool_request()
        # The values of the result a reply must repeat: those the reference uses.
        must = [str(v) for v in res.values() if str(v) in ans]
        tools.append({"tools": g.tool_set(name), "question": q, "name": name, "arguments": args,
                      "result": json.dumps(res, ensure_ascii=False), "answer": ans, "must": must})
    recall = []
    for i in range(50):
        body, _, _, v = g.recall_messages(g.r.randint(130, 170))
        recall.append({"question": body, "answer": v})
    return {"arith": arith, "tools": tools, "recall": recall}
