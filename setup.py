"""Builds tbdfs_dgl and its C++ extension ``tbdfs_dgl._C`` by handing the build to CMake.

Honours ``CMAKE_ARGS`` (extra ``-D`` options), ``CMAKE_BUILD_PARALLEL_LEVEL`` and
``DEBUG=1`` (a debug build with assertions), as pybind11's ``cmake_example`` does.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: CMakeExtension) -> None:
        out_dir = Path(self.get_ext_fullpath(ext.name)).parent.resolve()
        cfg = "Debug" if os.environ.get("DEBUG") == "1" else "Release"
        args = [
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DCMAKE_BUILD_TYPE={cfg}",
        ]
        try:
            import pybind11

            args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        args += [a for a in os.environ.get("CMAKE_ARGS", "").split(" ") if a]
        try:
            import ninja  # noqa: F401

            args.append("-GNinja")
        except ImportError:
            pass
        build_args = []
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
            build_args.append(f"-j{os.cpu_count() or 1}")
        build_dir = Path(self.build_temp) / ext.name
        build_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cmake", str(ROOT), *args], cwd=build_dir, check=True)
        subprocess.run(["cmake", "--build", ".", *build_args], cwd=build_dir, check=True)


def version() -> str:
    text = (ROOT / "tbdfs_dgl" / "__init__.py").read_text()
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


setup(
    name="tbdfs-dgl",
    version=version(),
    description="tBDFS temporal graph neural network for DGL, on a fast C++ temporal sampler",
    long_description=(ROOT / "README.md").read_text() if (ROOT / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    packages=find_packages(include=["tbdfs_dgl", "tbdfs_dgl.*"]),
    ext_modules=[CMakeExtension("tbdfs_dgl._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.8",
    # Honest but loose: the extension needs numpy, the model and trainer torch alone (any
    # device torch supports).  DGL is only for interop (batch.blocks, to_dgl, the tests'
    # reference): its PyPI wheels load only with the torch release they were built for
    # (dgl 2.1.0: torch <= 2.2.1, numpy < 2), so it is an extra.  requirements/dev.txt
    # pins the tested DGL set.
    install_requires=[
        "numpy>=1.21",
        "torch>=2.0",
        "pandas>=1.3",
        "scikit-learn>=1.0",
        "tqdm>=4.0",
        "psutil>=5.0",
    ],
    extras_require={"dgl": ["dgl>=1.1"], "test": ["pytest>=7"],
                    "plots": ["matplotlib>=3.5"]},
    zip_safe=False,
)
