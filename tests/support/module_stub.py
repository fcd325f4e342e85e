"""An AnsibleModule stand-in for running a module's run_module() in unit tests: exit_json raises Exited with the
result, fail_json fails the test with it."""


class Exited(Exception):
    pass


class StubModule:
    def __init__(self, params, check_mode=False):
        self.params, self.check_mode = params, check_mode

    def exit_json(self, **result):
        raise Exited(result)

    def fail_json(self, **result):
        raise AssertionError(result)
