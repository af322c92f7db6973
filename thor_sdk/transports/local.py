"""This machine as a "device": commands run locally, push/pull copy files under a work folder."""

import os
import shutil
import tempfile

from thor_sdk.errors import NotFoundError

from .base import Transport, check_local_tree


class LocalTransport(Transport):
    """Runs argv locally. Device paths are local paths (relative ones resolve under ``root``)."""

    name = "local"

    def __init__(self, root=None, runner=None):
        super().__init__(runner)
        self.root = os.fspath(root) if root else None

    def _abs(self, remote_path):
        if os.path.isabs(remote_path) or self.root is None:
            return remote_path
        return os.path.join(self.root, remote_path)

    def run(self, argv, timeout_s=None, check=True, input=None):
        res = self._exec(argv, timeout_s=timeout_s, input=input)
        if check and res.returncode != 0:
            raise self._fail(f"`{argv[0]}`", res)
        return res

    @staticmethod
    def _copy(src, dst):
        if not os.path.exists(src):
            raise NotFoundError(f"no such file or folder: {src}")
        os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
        if os.path.isdir(src):
            if os.path.exists(dst):
                shutil.rmtree(dst)
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst)

    def push(self, local_path, remote_path):
        self._copy(local_path, self._abs(remote_path))

    def pull(self, remote_path, local_path):
        self._copy(self._abs(remote_path), local_path)
        check_local_tree(local_path)

    def workdir(self):
        if self.root is None:
            self.root = tempfile.mkdtemp(prefix="thor-local-device-")
        return self.root

    def info(self):
        import platform

        return {"transport": self.name, "hostname": platform.node(), "platform": platform.platform()}
