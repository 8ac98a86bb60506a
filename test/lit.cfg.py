# lit configuration of nnsc's golden tests (test/golden/<tool>/*.test).
import os
import lit.formats

config.name = "nnsc-golden"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test"]
config.test_source_root = os.path.join(config.nnsc_src_root, "test", "golden")
config.excludes = ["Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.nnsc_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
config.environment["OMP_NUM_THREADS"] = "1"

config.substitutions.append(("%python", config.python))
config.substitutions.append(("%myops_lib", config.myops_lib))
config.substitutions.append(("%examples", os.path.join(config.nnsc_src_root, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
