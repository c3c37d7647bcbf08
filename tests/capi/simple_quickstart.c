/* simple_quickstart.c
* See Section 2 for compilation. Can be copied and run directly.
*/
#include <stdio.h>
#include "boxlite.h"
int main(void) {
printf("BoxLite C SDK version: %s\n", boxlite_version());
CBoxliteSimple *box = NULL;
CBoxliteError error = {0};
/* 0 = use defaults (cpus / memory_mib). */
if (boxlite_simple_new("python:slim", 0, 0, &box, &error) != Ok) {
fprintf(stderr, "create failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error); /* free error.message even on failure */
return 1;
}
/* Note: argc is the actual argument count; args does not need NULL termination (read by argc). */
const char *args[] = {"-c", "print('Hello from BoxLite!')"};
CBoxliteExecResult *result = NULL;
if (boxlite_simple_run(box, "python", args, 2, &result, &error) != Ok) {
fprintf(stderr, "run failed (code %d): %s\n",
error.code, error.message ? error.message : "unknown");
boxlite_error_free(&error);
boxlite_simple_free(box);
return 1;
}
/* A non-zero exit code does *not* report an error; check exit_code yourself. */
printf("exit_code = %d\n", result->exit_code);
printf("stdout = %s", result->stdout_text ? result->stdout_text : "");
if (result->stderr_text && result->stderr_text[0]) {
printf("stderr = %s", result->stderr_text);
}
boxlite_result_free(result); /* free the result */
boxlite_simple_free(box); /* automatically stop + remove + free the runtime */
return 0;
}
