# Every target calls a script in scripts/, which .ci/run uses too.
.PHONY: test bench lint fuzz dev

test: ## vet + race tests (PostgreSQL too when BATON_TEST_POSTGRES_DSN is set)
	@scripts/test.sh

bench: ## benchmarks with -benchmem
	@scripts/bench.sh

lint: ## gofmt, go vet, staticcheck
	@scripts/lint.sh

fuzz: ## each fuzz target in turn for FUZZTIME (default 20s), then a summary
	@scripts/fuzz.sh

dev: ## run the local dev server
	@go run ./cmd/baton dev
