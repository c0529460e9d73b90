/*
 * musl_harness.c -- evaluate the installed musl's libm on binary input.
 *
 * Build with musl's compiler wrapper (Debian: apt-get install musl-tools):
 *     musl-gcc -std=c11 -O2 -static libm/musl_harness.c -o musl_harness
 * Usage:
 *     musl_harness FUNC < inputs > outputs
 * FUNC is one of exp log tanh sin cos erf (native-endian binary64 in and out)
 * or expf logf tanhf sinf cosf erff (binary32).  Used by libm/check_libm.py to
 * compare presk_libm.c with musl bit for bit.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHUNK 65536

static const struct {
	const char *name;
	double (*fd)(double);
	float (*ff)(float);
} FUNCS[] = {
	{"exp", exp, 0},     {"log", log, 0},     {"tanh", tanh, 0},
	{"sin", sin, 0},     {"cos", cos, 0},     {"erf", erf, 0},
	{"expf", 0, expf},   {"logf", 0, logf},   {"tanhf", 0, tanhf},
	{"sinf", 0, sinf},   {"cosf", 0, cosf},   {"erff", 0, erff},
};

int main(int argc, char **argv)
{
	static double bufd[CHUNK];
	static float buff[CHUNK];
	size_t i, k, n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FUNC < in > out\n", argv[0]);
		return 2;
	}
	for (k = 0; k < sizeof FUNCS / sizeof FUNCS[0]; k++)
		if (strcmp(argv[1], FUNCS[k].name) == 0)
			break;
	if (k == sizeof FUNCS / sizeof FUNCS[0]) {
		fprintf(stderr, "%s: unknown function %s\n", argv[0], argv[1]);
		return 2;
	}
	if (FUNCS[k].fd) {
		while ((n = fread(bufd, sizeof bufd[0], CHUNK, stdin)) > 0) {
			for (i = 0; i < n; i++)
				bufd[i] = FUNCS[k].fd(bufd[i]);
			if (fwrite(bufd, sizeof bufd[0], n, stdout) != n)
				return 1;
		}
	} else {
		while ((n = fread(buff, sizeof buff[0], CHUNK, stdin)) > 0) {
			for (i = 0; i < n; i++)
				buff[i] = FUNCS[k].ff(buff[i]);
			if (fwrite(buff, sizeof buff[0], n, stdout) != n)
				return 1;
		}
	}
	return ferror(stdin) ? 1 : 0;
}
