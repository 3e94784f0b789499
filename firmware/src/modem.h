#ifndef MODEM_H
#define MODEM_H

#include <stdint.h>

#define MODEM_VERSION_MAJOR 1
#define MODEM_VERSION_MINOR 2

void modem_init(void);
/* One turn of the main loop: host bytes in, radio events out. Never blocks. */
void modem_step(void);

#endif
