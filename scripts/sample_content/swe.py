"""What the bundled sample rows of B8 (SWE-agent trajectories) say. Topics are plausible and varied; the tiny
demo model's text is meaningless anyway."""

from __future__ import annotations


SWE_SYSTEM_SHORT = (
    "SETTING: You are an autonomous programmer in a command line with a special interface.\n"
    "COMMANDS: open <path> [<line>], goto <line>, search_file <term>, find_file <name>, "
    "edit <start>:<end> (end with end_of_edit), submit.\n"
    "Reply with a DISCUSSION, then one command in a ``` block."
)


_SWE_COMMANDS = [
    ("open", "open <path> [<line_number>]", "opens the file at the given path in the editor. If line_number is provided, the window will be moved to include that line",
     [("path", "string", "the path to the file to open", True), ("line_number", "integer", "the line number to move the window to (if not provided, the window will start at the top of the file)", False)]),
    ("goto", "goto <line_number>", "moves the window to show <line_number>",
     [("line_number", "integer", "the line number to move the window to", True)]),
    ("scroll_down", "scroll_down", "moves the window down 100 lines", []),
    ("scroll_up", "scroll_up", "moves the window up 100 lines", []),
    ("create", "create <filename>", "creates and opens a new file with the given name",
     [("filename", "string", "the name of the file to create", True)]),
    ("search_dir", "search_dir <search_term> [<dir>]", "searches for search_term in all files in dir. If dir is not provided, searches in the current directory",
     [("search_term", "string", "the term to search for", True), ("dir", "string", "the directory to search in (if not provided, searches in the current directory)", False)]),
    ("search_file", "search_file <search_term> [<file>]", "searches for search_term in file. If file is not provided, searches in the current open file",
     [("search_term", "string", "the term to search for", True), ("file", "string", "the file to search in (if not provided, searches in the current open file)", False)]),
    ("find_file", "find_file <file_name> [<dir>]", "finds all files with the given name in dir. If dir is not provided, searches in the current directory",
     [("file_name", "string", "the name of the file to search for", True), ("dir", "string", "the directory to search in (if not provided, searches in the current directory)", False)]),
    ("edit", "edit <start_line>:<end_line>\n<replacement_text>\nend_of_edit",
     "replaces lines <start_line> through <end_line> (inclusive) with the given text in the open file. The replacement text is terminated by a line with only end_of_edit on it. All of the <replacement text> will be entered, so make sure your indentation is formatted properly. Python files will be checked for syntax errors after the edit. If the system detects a syntax error, the edit will not be executed. Simply try to edit the file again, but make sure to read the error message and modify the edit command you issue accordingly. Issuing the same command a second time will just lead to the same error message again.",
     [("start_line", "integer", "the line number to start the edit at", True), ("end_line", "integer", "the line number to end the edit at (inclusive)", True),
      ("replacement_text", "string", "the text to replace the current selection with", True)]),
    ("submit", "submit", "submits your current code and terminates the session", []),
]


def _swe_long_system() -> str:
    docs = []
    for name, sig, doc, args in _SWE_COMMANDS:
        block = f"{name}:\n  docstring: {doc}\n  signature: {sig}\n"
        if args:
            block += "  arguments:\n" + "".join(
                f"    - {a} ({t}) [{'required' if req else 'optional'}]: {d}\n" for a, t, d, req in args)
        docs.append(block)
    return (
        "SETTING: You are an autonomous programmer, and you're working directly in the command line with a "
        "special interface.\n\nThe special interface consists of a file editor that shows you 100 lines of a "
        "file at a time.\nIn addition to typical bash commands, you can also use the following commands to help "
        "you navigate and edit files.\n\nCOMMANDS:\n" + "\n".join(docs) +
        "\nPlease note that THE EDIT COMMAND REQUIRES PROPER INDENTATION.\nIf you'd like to add the line "
        "'        print(x)' you must fully write that out, with all those spaces before the code! Indentation is "
        "important and code that is not indented correctly will fail and require fixing before it can be run.\n\n"
        "RESPONSE FORMAT:\nYour shell prompt is formatted as follows:\n(Open file: <path>) <cwd> $\n\nYou need to "
        "format your output using two fields; discussion and command.\nYour output should always include _one_ "
        "discussion and _one_ command field EXACTLY as in the following example:\nDISCUSSION\nFirst I'll start by "
        "using ls to see what files are in the current directory. Then maybe we can look at some relevant files to "
        "see what they look like.\n```\nls -a\n```\n\nYou should only include a *SINGLE* command in the command "
        "section and then wait for a response from the shell before continuing with more discussion and commands. "
        "Everything you include in the DISCUSSION section will be saved for future reference.\nIf you'd like to "
        "issue two commands at once, PLEASE DO NOT DO THAT! Please instead first submit just the first command, and "
        "then after receiving a response you'll be able to issue the second command.\nYou're free to use any other "
        "bash commands you want (e.g. find, grep, cat, ls, cd) in addition to the special commands listed above.\n"
        "However, the environment does NOT support interactive session commands (e.g. python, vim), so please do "
        "not invoke them."
    )


SWE_USER_TEMPLATE = (
    "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
    "{issue}\n\nINSTRUCTIONS: Solve this issue on your own, one command per response, then run `submit`.\n"
    "(Open file: n/a)\n(Current directory: /{repo})\nbash-$"
)


def _swe(instance_id: str, model: str, target: bool, issue: str, file: str, line: int, old: str, new: str,
         **extra) -> dict:
    repo = instance_id.rsplit("-", 1)[0]
    patch = (f"diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -{line},1 +{line},1 @@\n"
             f"-{old}\n+{new}\n")
    return {"instance_id": instance_id, "repo": repo, "model": model, "target": target, "issue": issue,
            "file": file, "patch": patch,
            "step1": f"DISCUSSION\nLet me find the file mentioned in the issue first.\n```\nfind_file {file.rsplit('/', 1)[-1]}\n```",
            "obs1": f"Found 1 matches for \"{file.rsplit('/', 1)[-1]}\" in /{repo}:\n/{repo}/{file}\n(Open file: n/a)\n(Current directory: /{repo})\nbash-$",
            **extra}


def b8_content() -> dict:
    """nebius/SWE-agent-trajectories: short system prompt + short issue; two rows carry the full
    ~4,000-character SWE-agent system prompt (deliberately over-long for the demo model's context)."""
    M70, M8, M405 = "swe-agent-llama-70b", "swe-agent-llama-8b", "swe-agent-llama-405b"
    items = [
        _swe("marshmallow-code__marshmallow-1359", M70, True, "DateTime field fails to serialize timezone-aware values when format='iso' and the value has microseconds.",
             "src/marshmallow/fields.py", 1114, "        return value.isoformat()", "        return value.isoformat(timespec='auto')"),
        _swe("pydicom__pydicom-1139", M70, False, "Dataset.__repr__ crashes on PersonName values that contain non-ASCII characters.",
             "pydicom/valuerep.py", 640, "        return str(self.original_string)", "        return self.original_string.decode('utf-8', 'replace')"),
        _swe("pvlib__pvlib-python-1072", M8, True, "temperature.fuentes raises a TypeError when given a pandas Series with a timezone-aware index.",
             "pvlib/temperature.py", 599, "    timedelta_hours = np.diff(poa_global.index).astype(float)", "    timedelta_hours = poa_global.index.to_series().diff().dt.total_seconds() / 3600"),
        _swe("sqlfluff__sqlfluff-1625", M70, True, "L031 reports a false positive for table aliases used in a WHERE clause without a JOIN.",
             "src/sqlfluff/rules/L031.py", 149, "        if not from_expression:", "        if not from_expression or not join_clauses:"),
        _swe("pyvista__pyvista-4315", M405, True, "Rectilinear grid constructor rejects plain Python lists for the x coordinates.",
             "pyvista/core/grid.py", 220, "        if not isinstance(x, np.ndarray):", "        if not isinstance(x, (np.ndarray, list)):"),
        _swe("pylint-dev__astroid-1978", M8, False, "Importing numpy emits a deprecation warning from astroid's brain plugin.",
             "astroid/raw_building.py", 470, "        getattr(sys.modules[modname], name)", "        inspect.getattr_static(sys.modules[modname], name)"),
        _swe("joke2k__faker-1520", M70, True, "pyfloat can return values outside [min_value, max_value] when right_digits is set.",
             "faker/providers/python/__init__.py", 128, "        result = float(f'{left_number}.{self.random_number(right_digits)}')", "        result = min(max(float(f'{left_number}.{self.random_number(right_digits)}'), min_value), max_value)"),
        _swe("python-jsonschema__jsonschema-1048", M405, False, "ErrorTree.__getitem__ raises KeyError for a valid path with no errors instead of returning an empty tree.",
             "jsonschema/exceptions.py", 285, "        return self._contents[index]", "        return self._contents.get(index, self.__class__())"),
        _swe("tox-dev__tox-2212", M8, True, "The --skip-missing-interpreters flag is ignored when given in tox.ini as 'true'.",
             "src/tox/config/cli/parser.py", 310, "        return value == 'True'", "        return str(value).lower() == 'true'"),
        _swe("encode__httpx-1303", M70, True, "Response.iter_lines splits lines incorrectly when a chunk ends with a carriage return.",
             "httpx/_decoders.py", 204, "        lines = text.splitlines(True)", "        lines = self._split(text)"),
        _swe("mwaskom__seaborn-2848", M70, False, "pairplot fails with hue_order containing values missing from the data.",
             "seaborn/_oldcore.py", 151, "            normed = self.norm(key)", "            normed = self.norm(key) if key in self.lookup_table else np.nan"),
        _swe("pallets__click-2271", M405, True, "Boolean flags with secondary names show the wrong default in the help output.",
             "src/click/core.py", 2789, "            default_string = str(default_value)", "            default_string = self.secondary_opts[0] if not default_value and self.secondary_opts else str(default_value)"),
        _swe("iterative__dvc-4066", M8, False, "dvc ignore patterns with a trailing slash do not match directories.",
             "dvc/ignore.py", 55, "        return self.ignore_spec.match_file(path)", "        return self.ignore_spec.match_file(path) or self.ignore_spec.match_file(path + '/')"),
        _swe("Project-MONAI__MONAI-3384", M70, True, "RandAffined ignores the `device` argument and always runs on CPU.",
             "monai/transforms/spatial/dictionary.py", 712, "        self.rand_affine = RandAffine(prob=1.0)", "        self.rand_affine = RandAffine(prob=1.0, device=device)"),
        _swe("conan-io__conan-10875", M70, True, "`conan inspect` prints None for the license attribute when it is a tuple.",
             "conans/client/conan_api.py", 320, "        result[attr] = str(value)", "        result[attr] = ', '.join(value) if isinstance(value, tuple) else str(value)"),
        _swe("getmoto__moto-5752", M8, True, "SSM get_parameters_by_path drops parameters whose names contain a dot.",
             "moto/ssm/models.py", 1310, "        if not re.match(r'^[\\w/-]+$', name):", "        if not re.match(r'^[\\w./-]+$', name):"),
        _swe("python__mypy-11290", M405, False, "Incorrect 'unused type: ignore' warning for ignores on decorated overloads.",
             "mypy/errors.py", 488, "            if not used:", "            if not used and not self.is_overload_decorator(line):"),
        _swe("spulec__freezegun-435", M70, True, "freeze_time does not patch time.monotonic_ns on Python 3.7+.",
             "freezegun/api.py", 42, "real_monotonic = time.monotonic", "real_monotonic = time.monotonic\nreal_monotonic_ns = getattr(time, 'monotonic_ns', None)"),
        _swe("beetbox__beets-3869", M8, False, "The web plugin returns 500 when an album has no artwork.",
             "beetsplug/web/__init__.py", 248, "    return flask.send_file(album.artpath)", "    return flask.send_file(album.artpath) if album.artpath else flask.abort(404)"),
        _swe("psf__requests-2317", M70, True, "`method = builtin_str(method)` turns b'GET' into the literal string \"b'GET'\" on Python 3.",
             "requests/sessions.py", 428, "        method = builtin_str(method)", "        method = to_native_string(method)"),
        _swe("pydata__xarray-4094", M405, True, "to_unstacked_dataset breaks for single-dimension variables.",
             "xarray/core/dataarray.py", 1961, "            data_dict[k] = self.sel({variable_dim: k}).squeeze(drop=True)", "            data_dict[k] = self.sel({variable_dim: k}, drop=True).squeeze(drop=True)"),
        _swe("marshmallow-code__marshmallow-1359", M8, False, "DateTime field fails to serialize timezone-aware values when format='iso' and the value has microseconds.",
             "src/marshmallow/fields.py", 1114, "        return value.isoformat()", "        return value.isoformat(sep='T')", exit_status="submitted (exit_cost)"),
        _swe("Suor__funcy-87", M70, True, "`chunks` with a step larger than the size drops the final partial chunk.",
             "funcy/seqs.py", 312, "    return _cut(True, n, step, seq)", "    return _cut(False, n, step, seq)"),
        _swe("alecthomas__voluptuous-393", M8, True, "Schema.extend loses the `extra` setting of the original schema.",
             "voluptuous/schema_builder.py", 450, "        result = type(self)(schema, required=self.required)", "        result = type(self)(schema, required=self.required, extra=self.extra)"),
        _swe("sqlfluff__sqlfluff-1625", M405, True, "L031 reports a false positive for table aliases used in a WHERE clause without a JOIN.",
             "src/sqlfluff/rules/L031.py", 149, "        if not from_expression:", "        if not from_expression or not join_clauses:", long=True),
        _swe("pvlib__pvlib-python-1072", M70, False, "temperature.fuentes raises a TypeError when given a pandas Series with a timezone-aware index.",
             "pvlib/temperature.py", 599, "    timedelta_hours = np.diff(poa_global.index).astype(float)", "    timedelta_hours = np.diff(poa_global.index.asi8) / 3.6e12", long=True, exit_status="early_exit"),
    ]
    return {"system": SWE_SYSTEM_SHORT, "long_system": _swe_long_system(), "user_template": SWE_USER_TEMPLATE,
            "items": items}
