-- A clinic in the style of real PostgreSQL applications: domains, enum types,
-- serial and identity keys, partial and expression indexes, inheritance,
-- declarative partitions, CHECKs, ON DELETE actions, views and functions to skip.
CREATE SCHEMA clinic;
SET search_path TO clinic;

CREATE DOMAIN clinic.positive_int AS integer CHECK (VALUE > 0);
CREATE DOMAIN clinic.email AS varchar(254) NOT NULL CHECK (VALUE LIKE '%@%');
CREATE TYPE clinic.visit_status AS ENUM ('booked', 'arrived', 'done', 'cancelled');

CREATE TABLE clinic.doctor (
    doctor_id serial PRIMARY KEY,
    full_name text NOT NULL,
    email clinic.email,
    licence varchar(20) NOT NULL UNIQUE,
    hired_on date NOT NULL DEFAULT CURRENT_DATE,
    deleted_at timestamptz,
    CONSTRAINT doctor_name_len CHECK (length(full_name) BETWEEN 2 AND 200)
);

CREATE UNIQUE INDEX doctor_email_live ON clinic.doctor (email) WHERE deleted_at IS NULL;
CREATE INDEX doctor_name_lower ON clinic.doctor (lower(full_name));

CREATE TABLE clinic.patient (
    patient_id bigint GENERATED ALWAYS AS IDENTITY (START WITH 1000) PRIMARY KEY,
    code text NOT NULL UNIQUE,
    born date NOT NULL CHECK (born > '1900-01-01'),
    height_cm clinic.positive_int,
    sex char(1) NOT NULL CHECK (sex IN ('f', 'm', 'x')),
    notes text
);

CREATE TABLE clinic.room (
    room_no text PRIMARY KEY,
    floor smallint NOT NULL CHECK (floor >= 0 AND floor < 50)
);

CREATE TABLE clinic.visit (
    visit_id bigserial PRIMARY KEY,
    patient_id bigint NOT NULL REFERENCES clinic.patient (patient_id) ON DELETE CASCADE,
    doctor_id integer NOT NULL REFERENCES clinic.doctor ON DELETE RESTRICT,
    room_no text REFERENCES clinic.room (room_no) ON DELETE SET NULL ON UPDATE CASCADE,
    status clinic.visit_status NOT NULL DEFAULT 'booked'::clinic.visit_status,
    starts_at timestamptz NOT NULL,
    ends_at timestamptz,
    fee numeric(10,2) DEFAULT 0 CHECK (fee >= 0),
    CONSTRAINT visit_time CHECK (ends_at IS NULL OR ends_at > starts_at)
);

CREATE SEQUENCE clinic.invoice_no_seq START WITH 5000;
CREATE TABLE clinic.invoice (
    invoice_no integer NOT NULL DEFAULT nextval('clinic.invoice_no_seq'::regclass),
    visit_id bigint NOT NULL,
    amount numeric(12,2) NOT NULL,
    paid boolean NOT NULL DEFAULT false,
    CONSTRAINT invoice_pkey PRIMARY KEY (invoice_no),
    CONSTRAINT invoice_amount_positive CHECK (amount > 0 AND amount <= 100000)
);
ALTER SEQUENCE clinic.invoice_no_seq OWNED BY clinic.invoice.invoice_no;
ALTER TABLE clinic.invoice ADD CONSTRAINT invoice_visit_fk FOREIGN KEY (visit_id)
    REFERENCES clinic.visit (visit_id) ON DELETE CASCADE;

CREATE TABLE clinic.audit_base (
    at timestamptz NOT NULL DEFAULT now(),
    actor text NOT NULL
);
CREATE TABLE clinic.visit_audit (
    visit_id bigint NOT NULL,
    what text NOT NULL
) INHERITS (clinic.audit_base);

CREATE TABLE clinic.measurement (
    patient_id bigint NOT NULL,
    taken_on date NOT NULL,
    kind text NOT NULL,
    value double precision NOT NULL,
    PRIMARY KEY (patient_id, taken_on, kind)
) PARTITION BY RANGE (taken_on);
CREATE TABLE clinic.measurement_2026 (
    patient_id bigint NOT NULL,
    taken_on date NOT NULL,
    kind text NOT NULL,
    value double precision NOT NULL
);
ALTER TABLE clinic.measurement ATTACH PARTITION clinic.measurement_2026
    FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');

CREATE TABLE clinic.staff_member (
    staff_id integer PRIMARY KEY,
    mentor_id integer REFERENCES clinic.staff_member (staff_id),
    name text NOT NULL
);

COMMENT ON TABLE clinic.visit IS 'One appointment';
COMMENT ON COLUMN clinic.visit.fee IS 'In euros';

CREATE VIEW clinic.open_visits AS SELECT * FROM clinic.visit WHERE ends_at IS NULL;
CREATE FUNCTION clinic.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.ends_at := now();
  RETURN NEW;
END $$;
