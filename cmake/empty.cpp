// Placeholder so a module library can be configured before its first source file exists.
