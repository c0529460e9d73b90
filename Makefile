# presk — developer targets. `make test` installs what it needs into .venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PRESK  := $(VENV)/bin/presk
STAMP  := $(VENV)/.installed

.PHONY: calibrate
.PHONY: bench-plans layout-check plan-check export-examples pytorch-conformance demo test check loc clean golden-update bench bench-train bench-serve serve-examples train-examples bench-reference bench-synth conformance c-conformance libm-check venv fuzz tutorial

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip >/dev/null
	$(PY) -m pip install -q -e '.[dev]'
	@# PyTorch (exactly 2.13.0, a CPU build) is the oracle of the gradient tests;
	@# without it those tests are skipped with their reason.
	$(PY) -m pip install -q torch==2.13.0 || echo "presk: torch==2.13.0 could not be installed; the PyTorch tests will be skipped"
	$(PY) -m pip install -q -e '.[export]' || echo "presk: onnx and onnxruntime could not be installed; the ONNX tests will be skipped"
	@# Clang and its OpenMP runtime: exported programs are checked with both compilers.
	@command -v clang >/dev/null 2>&1 && [ -e /usr/lib/llvm-14/lib/libomp.so -o -n "$$(find /usr/lib -name 'libomp*.so' 2>/dev/null | head -1)" ] || \
	  ( (apt-get update -qq && apt-get install -y -qq clang libomp-dev) >/dev/null 2>&1 || \
	    echo "presk: clang could not be installed; its C checks will be skipped" )
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PRESK) check tutorial/02_norm.psk --summary
	$(PRESK) run tutorial/02_norm.psk --entry 'RMSNorm{4}.apply' --dim batch=2 --digits 6

# Two workers (a file's tests stay on one, so module fixtures are built once).
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile tests

fuzz: $(STAMP)
	PRESK_FUZZ_SCALE=$${PRESK_FUZZ_SCALE:-10} $(PY) -m pytest -q tests/test_fuzz.py tests/test_fuzz_commands.py

tutorial: $(STAMP)
	PRESK=$(PRESK) $(PY) tests/tutorial_run.py

check: $(STAMP)
	$(VENV)/bin/ruff check presk tests
	$(VENV)/bin/ruff format --check presk
	$(VENV)/bin/mypy presk

golden-update: $(STAMP)
	$(PY) -m pytest tests --update-golden

bench: $(STAMP)
	$(PY) benchmarks/native.py

conformance: $(STAMP)
	@# --excuse-conditioning: an element whose reference, evaluated at the realization's
	@# precision on rounded inputs, misses by as much is reported as ill-conditioned.
	$(PY) conformance/run.py --excuse-conditioning

c-conformance: $(STAMP)
	$(PY) conformance/c_export.py

# Every point of every layout space checked against point zero's bits, natively and on the
# kernel interpreter.
layout-check: $(STAMP)
	PRESK_LAYOUTS=full $(PY) -m pytest -q tests/test_layouts.py tests/test_interp.py -k every

# The layout space of a 1024³ GEMM against OpenBLAS, the model's picks, `presk plan`'s time.
bench-plans: $(STAMP)
	$(PY) benchmarks/plans.py

# The layout cost model calibrated on a GEMM at three sizes (at 1024 its operands outgrow
# an L2 of 2 MiB) and two thin products (each call keeps the samples of the calls before).
calibrate: $(STAMP)
	@mkdir -p out
	$(PRESK) bench experiments/gemm.psk --entry gemm --dim N=256 --realize f32 --calibrate out/layout.json --space calib --repeat 5
	$(PRESK) bench experiments/gemm.psk --entry gemm --dim N=512 --realize f32 --calibrate out/layout.json --space calib --repeat 5
	$(PRESK) bench experiments/gemm.psk --entry gemm --dim N=1024 --realize f32 --calibrate out/layout.json --space calib --repeat 3
	$(PRESK) bench experiments/thin.psk --entry thin_k --dim M=2048 --dim N=1024 --realize f32 --calibrate out/layout.json --space calib --repeat 5
	$(PRESK) bench experiments/thin.psk --entry thin_n --dim M=2048 --dim N=1024 --realize f32 --calibrate out/layout.json --space calib --repeat 5

# A plan stating every default prints every conformance entry's C text unchanged.
plan-check: $(STAMP)
	$(PY) conformance/plan_check.py

libm-check: $(STAMP)
	$(PY) libm/check_libm.py

bench-train: $(STAMP)
	$(PY) benchmarks/train.py
	$(PY) benchmarks/export_train.py

# The training chapter's runs: the small regression and the tiny MiniGPT, on the
# reference and natively in f64 and f32 (a few minutes: the reference is exact, not fast).
TINY_GPT := tests/examples/minigpt/train_minigpt.psk --const V=64 --const D=16 --const H=2 --const L=2
train-examples: $(STAMP)
	$(PRESK) train tests/train/regression.psk --steps 200 --log-every 50 --ckpt out/train/regression
	$(PRESK) train tests/train/regression.psk --steps 200 --log-every 50 --ckpt out/train/regression_f64 --backend native
	$(PRESK) train tests/train/regression.psk --steps 200 --log-every 50 --ckpt out/train/regression_f32 --backend native --realize f32
	$(PRESK) train $(TINY_GPT) --steps 20 --log-every 5 --ckpt out/train/minigpt
	$(PRESK) train $(TINY_GPT) --steps 20 --log-every 5 --ckpt out/train/minigpt_f64 --backend native
	$(PRESK) train $(TINY_GPT) --steps 20 --log-every 5 --ckpt out/train/minigpt_f32 --backend native --realize f32
	$(PRESK) data diff out/train/minigpt/final.psk.d out/train/minigpt_f64/final.psk.d
	$(PRESK) data diff out/train/minigpt/final.psk.d out/train/minigpt_f32/final.psk.d

bench-export: $(STAMP)
	$(PY) benchmarks/export.py

bench-serve: $(STAMP)
	$(PY) benchmarks/serve.py

# Train the tiny MiniGPT briefly, then generate greedily from its weights on the reference,
# natively in f64 and f32, from the exported C program and from the PyTorch export's
# serve.py (float64): the tokens must be the same.
SERVE_GPT := tests/examples/minigpt/serve_minigpt.psk --const V=64 --const D=16 --const H=2 --const L=2
SERVE_ARGS := --weights out/serve/ckpt/final.psk.d --prompt 'the compiler ' --tokens 40 --greedy
serve-examples: $(STAMP)
	$(PRESK) train $(TINY_GPT) --steps 60 --epochs 2 --log-every 20 --backend native --ckpt out/serve/ckpt
	$(PRESK) serve $(SERVE_GPT) $(SERVE_ARGS) > out/serve/reference.txt
	$(PRESK) serve $(SERVE_GPT) $(SERVE_ARGS) --backend native > out/serve/native_f64.txt
	$(PRESK) serve $(SERVE_GPT) $(SERVE_ARGS) --backend native --realize f32 > out/serve/native_f32.txt
	$(PRESK) export $(SERVE_GPT) --target c --serve --weights out/serve/ckpt/final.psk.d -o out/serve/c
	$(MAKE) -s -C out/serve/c check
	out/serve/c/run out/serve/c/weights.psk.d -p 'the compiler ' -n 40 -g > out/serve/c.txt
	$(PRESK) export $(SERVE_GPT) --target pytorch --mode readable --serve --weights out/serve/ckpt/final.psk.d -o out/serve/pytorch
	$(PY) out/serve/pytorch/serve.py --greedy --prompt 'the compiler ' --tokens 40 --dtype float64 > out/serve/pytorch.txt
	cmp out/serve/reference.txt out/serve/native_f64.txt
	cmp out/serve/reference.txt out/serve/native_f32.txt
	cmp out/serve/reference.txt out/serve/c.txt
	cmp out/serve/reference.txt out/serve/pytorch.txt
	@echo "serve-examples: the same greedy tokens on the reference, f64, f32, the C program and PyTorch:"
	@cat out/serve/reference.txt

bench-synth: $(STAMP)
	$(PY) benchmarks/synth.py

bench-reference: $(STAMP)
	$(PY) benchmarks/reference.py

loc:
	@for d in presk presk/*/; do \
	  n=$$(find $$d -maxdepth 1 -name '*.py' | xargs cat 2>/dev/null | wc -l); \
	  printf '%6d  %s\n' $$n $$d; done
	@printf '%6d  total\n' $$(find presk -name '*.py' | xargs cat | wc -l)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache

# The corpus ladder (corpus/README.md): not part of `make test`. `corpus-data` installs the
# Debian package `fortunes` when it is absent and builds corpus/data/ from it.
.PHONY: corpus-data corpus corpus-gpt
corpus-data: $(STAMP)
	$(MAKE) -C corpus data PRESK=$(abspath $(PRESK)) PY=$(abspath $(PY))

# Each rung briefly: the counted loss, then the trained rungs' losses for a few steps.
CORPUS_STEPS ?= 50
corpus: corpus-data
	$(PRESK) run corpus/01_bigram_count.psk --entry loss --data corpus/data/bigrams.psk.d --backend native --digits 10
	$(PRESK) train corpus/02_bigram_neural.psk --steps $(CORPUS_STEPS) --log-every 10 --backend native
	$(PRESK) train corpus/03_mlp.psk --steps $(CORPUS_STEPS) --log-every 10 --backend native
	$(PRESK) check corpus/05_gpt.psk --summary

# The course GPT, one epoch of its training run (GPT_STEPS=N for fewer steps); no sampling yet.
corpus-gpt: corpus-data
	$(PRESK) train corpus/05_gpt.psk --log-every 10 --backend native --realize f32 $(if $(GPT_STEPS),--steps $(GPT_STEPS))

# The PyTorch exports of the tutorial and MiniGPT entries (docs/pytorch.md), and their tests.
PT_MINI := --const V=64 --const D=16 --const H=2 --const L=2
PT_EXPORT := $(PRESK) export --target pytorch --mode readable
export-examples: $(STAMP)
	mkdir -p out
	$(PT_EXPORT) tutorial/01_linear.psk --conformance-entry 'Linear{3, 2}.apply' --dim batch=2 -o out/pytorch_linear
	$(PT_EXPORT) tutorial/02_norm.psk --shapes=check --conformance-entry 'RMSNorm{4}.apply' --dim batch=2 -o out/pytorch_norm
	$(PT_EXPORT) tutorial/03_attention.psk --shapes=check --conformance-entry attend --dim B=2 --dim T=3 -o out/pytorch_attention
	$(PT_EXPORT) tutorial/04_grad.psk --conformance-entry loss_grad --dim D=3 --dim B=2 -o out/tutorial_grad
	$(PT_EXPORT) tutorial/06_tower.psk --shapes=check --conformance-entry Tower.apply --dim batch=2 -o out/tutorial_tower
	$(PT_EXPORT) tests/examples/minigpt/minigpt.psk $(PT_MINI) --shapes=check --conformance-entry MiniGPT.apply --dim B=2 --dim T=8 -o out/pytorch_minigpt
	$(PT_EXPORT) tests/examples/minigpt/train_minigpt.psk $(PT_MINI) --conformance-entry loss --dim B=2 --dim T=8 -o out/pytorch_minigpt_loss
	$(PT_EXPORT) tutorial/05_sample.psk --conformance-entry pick --dim B=64 -o out/tutorial_sample
	$(PT_EXPORT) tutorial/07_train.psk --conformance-entry train:10 -o out/tutorial_train
	$(PT_EXPORT) tutorial/07_train.psk --conformance-entry run.step --dim B=8 -o out/tutorial_adamw_step
	$(PT_EXPORT) tests/export_pytorch/draws.psk --conformance-entry Net.noisy --dim batch=16 -o out/pytorch_dropout
	$(PT_EXPORT) tests/export_pytorch/draws.psk --conformance-entry pick --dim B=64 -o out/pytorch_sample
	$(PT_EXPORT) tests/export_pytorch/draws.psk --conformance-entry fresh -o out/pytorch_init
	$(PT_EXPORT) tests/export_pytorch/draws.psk --conformance-entry regroup --dim B=2 -o out/pytorch_merge_split

PT_DIRS := pytorch_linear pytorch_norm pytorch_attention tutorial_grad tutorial_sample tutorial_tower pytorch_minigpt pytorch_minigpt_loss tutorial_train tutorial_adamw_step pytorch_dropout pytorch_sample pytorch_init pytorch_merge_split
pytorch-conformance: export-examples
	for d in $(PT_DIRS); do (cd out/$$d && ../../$(PY) -m pytest -q -p no:cacheprovider test_conformance.py) || exit 1; done
