// A private header of low/.
